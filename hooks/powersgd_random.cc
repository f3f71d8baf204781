#include "hooks/powersgd_random.h"

#include <cmath>

namespace ddpx {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_standard_normal(float* out, int64_t n, uint64_t seed) {
  SplitMix64 gen(seed);
  // A uniform in (0, 1]: 53 random bits, shifted off zero so log() is finite.
  auto uniform = [&gen] { return ((gen.next() >> 11) + 1) * 0x1.0p-53; };
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    const double angle = kTwoPi * uniform();
    out[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < n) out[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

}  // namespace ddpx
