#include "examples/nn/init.h"

#include <cmath>

namespace ddpx::nn {

Rng::Rng(uint64_t seed) : state_(seed) {}

// SplitMix64: tiny, fast, and well distributed for every seed (including 0).
uint64_t Rng::next_u64() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

float Rng::uniform01() {
  return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
}

uint64_t Rng::below(uint64_t n) {
  // Rejection sampling keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

void init_uniform_fan_in(const Tensor& t, int64_t fan_in, Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(-bound, bound);
}

}  // namespace ddpx::nn
