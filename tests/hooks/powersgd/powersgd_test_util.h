// Helpers for the PowerSGD tests (ranks come from tests/rank_threads.h):
// buckets built from shapes, and the deterministic inputs
// tests/reference/powersgd_goldens.py also uses.
#ifndef DDPX_TESTS_HOOKS_POWERSGD_POWERSGD_TEST_UTIL_H_
#define DDPX_TESTS_HOOKS_POWERSGD_POWERSGD_TEST_UTIL_H_

#include <memory>
#include <vector>

#include "hooks/grad_bucket.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {
namespace powersgd_test {

int64_t total_numel(const std::vector<Shape>& shapes);

// A bucket holding gradients of `shapes` back to back, filled with `values`.
GradBucket make_bucket(size_t index, bool is_last,
                       const std::vector<Shape>& shapes,
                       const std::vector<float>& values);

// ((i*37 + t*11 + r*5 + i*i % 7) % 29 - 14) / 8: exact in float32.
std::vector<float> golden_input(int64_t numel, int iteration, int rank);
// ((j*13 + 7) % 17 - 8) / 4.
std::vector<float> golden_q_init(int64_t numel);

// N(0, 1) values, different for every (seed, rank, iteration).
std::vector<float> random_input(int64_t numel, uint64_t seed, int rank,
                                int iteration);

}  // namespace powersgd_test
}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_POWERSGD_POWERSGD_TEST_UTIL_H_
