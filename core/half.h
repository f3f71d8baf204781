// IEEE float16 and bfloat16 storage types with round-to-nearest-even
// conversions. The conversions are constexpr-friendly scalar code usable from
// host and device (hooks/ and cuda/ vectorize on top of them).
#ifndef DDPX_CORE_HALF_H_
#define DDPX_CORE_HALF_H_

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

#if defined(__CUDACC__)
#define DDPX_HOST_DEVICE __host__ __device__
#else
#define DDPX_HOST_DEVICE
#endif

namespace ddpx {

DDPX_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

DDPX_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// float32 -> float16 bits, round to nearest even; overflow gives +-inf, NaN
// stays NaN.
DDPX_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal (or zero) in half
    // Add 0.5 in the target's lowest subnormal place and let float rounding
    // do round-to-nearest-even.
    float magnitude = bits_float(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(magnitude) - 0x3f000000u));
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (abs >> 13));
}

DDPX_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float32 -> bfloat16 bits, round to nearest even; NaN stays NaN.
DDPX_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

DDPX_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  DDPX_HOST_DEVICE explicit Half(float f) : bits(float_to_half_bits(f)) {}
  DDPX_HOST_DEVICE operator float() const { return half_bits_to_float(bits); }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  DDPX_HOST_DEVICE explicit BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  DDPX_HOST_DEVICE operator float() const { return bfloat16_bits_to_float(bits); }
};

template <> struct DTypeOf<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };

}  // namespace ddpx

#endif  // DDPX_CORE_HALF_H_
