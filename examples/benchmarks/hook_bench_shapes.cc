#include "examples/benchmarks/hook_bench_shapes.h"

namespace ddpx {
namespace bench {
std::vector<int64_t> bucket_numels(const std::vector<std::vector<int64_t>>& shapes,
                                   int64_t first_cap_bytes, int64_t bucket_cap_bytes) {
  std::vector<int64_t> buckets;
  int64_t current = 0;
  for (auto it = shapes.rbegin(); it != shapes.rend(); ++it) {
    int64_t n = 1;
    for (int64_t d : *it) n *= d;
    current += n;
    const int64_t cap = buckets.empty() ? first_cap_bytes : bucket_cap_bytes;
    if (current * 4 >= cap) {
      buckets.push_back(current);
      current = 0;
    }
  }
  if (current > 0) buckets.push_back(current);
  return buckets;
}

}  // namespace bench
}  // namespace ddpx
