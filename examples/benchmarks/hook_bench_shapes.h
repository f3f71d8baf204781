// The gradient shapes hook_bench pushes through each hook's compression
// work: ResNet-50's parameters (25.6M float32 values), bucketed as DDP does.
#ifndef DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_
#define DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_

#include <cstdint>
#include <vector>

namespace ddpx {
namespace bench {

// ResNet-50's parameter shapes in registration order (conv weights, batch
// norm scale and shift, the final fully connected layer).
std::vector<std::vector<int64_t>> resnet50_parameter_shapes();

// Element counts of DDP's buckets over `shapes`: reverse registration order,
// a first bucket of at most first_cap_bytes, then bucket_cap_bytes.
std::vector<int64_t> bucket_numels(const std::vector<std::vector<int64_t>>& shapes,
                                   int64_t first_cap_bytes = 1 << 20,
                                   int64_t bucket_cap_bytes = 25 << 20);

}  // namespace bench
}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_HOOK_BENCH_SHAPES_H_
