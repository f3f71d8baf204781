// DDP's bucketing of a gradient shape list, for hook_bench (the shapes come
// from powersgd_bench_part.h's resnet50_gradient_shapes()).
#ifndef DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_
#define DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_

#include <cstdint>
#include <vector>

namespace ddpx {
namespace bench {

// Element counts of DDP's buckets over `shapes`: reverse registration order,
// a first bucket of at most first_cap_bytes, then bucket_cap_bytes.
std::vector<int64_t> bucket_numels(const std::vector<std::vector<int64_t>>& shapes,
                                   int64_t first_cap_bytes = 1 << 20,
                                   int64_t bucket_cap_bytes = 25 << 20);

}  // namespace bench
}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_
