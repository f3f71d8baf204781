// Helpers for the PowerSGD tests: real Gloo ranks as threads of this process
// over one HashStore, buckets built from shapes, and the deterministic inputs
// tests/reference/powersgd_goldens.py also uses.
#ifndef DDPX_TESTS_HOOKS_POWERSGD_POWERSGD_TEST_UTIL_H_
#define DDPX_TESTS_HOOKS_POWERSGD_POWERSGD_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <vector>

#include "hooks/grad_bucket.h"
#include "process_group/process_group.h"

namespace ddpx {
namespace powersgd_test {

// `size` ProcessGroups on the Gloo backend (rank i at index i).
std::vector<std::shared_ptr<ProcessGroup>> make_gloo_ranks(int size);

// Runs fn(rank) on one thread per rank and joins them.
void on_every_rank(int size, const std::function<void(int rank)>& fn);

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
