#include "examples/benchmarks/hook_bench_shapes.h"

namespace ddpx {
namespace bench {
namespace {

void conv_bn(std::vector<std::vector<int64_t>>& out, int64_t in, int64_t outc, int64_t k) {
  out.push_back({outc, in, k, k});
  out.push_back({outc});
  out.push_back({outc});
}

}  // namespace

std::vector<std::vector<int64_t>> resnet50_parameter_shapes() {
  std::vector<std::vector<int64_t>> s;
  conv_bn(s, 3, 64, 7);
  const int blocks[4] = {3, 4, 6, 3};
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = 64 << stage, outc = width * 4;
    for (int b = 0; b < blocks[stage]; ++b) {
      conv_bn(s, in, width, 1);
      conv_bn(s, width, width, 3);
      conv_bn(s, width, outc, 1);
      if (b == 0) conv_bn(s, in, outc, 1);  // projection shortcut
      in = outc;
    }
  }
  s.push_back({1000, 2048});
  s.push_back({1000});
  return s;
}

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
