// The portable path: plain loops over half.h's scalar conversions. It is
// also the reference the AVX2 path is tested against, bit for bit.
#include <cmath>

#include "hooks/kernels/kernel_paths.h"
#include "core/half.h"

namespace ddpx {
namespace kernels {
namespace scalar_path {

void float_to_half(const float* src, uint16_t* dst, int64_t n, float divisor) {
  if (divisor == 1.0f) {
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half_bits(src[i] / divisor);
  }
}

void half_to_float(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

void float_to_bfloat16(const float* src, uint16_t* dst, int64_t n,
                       float divisor) {
  if (divisor == 1.0f) {
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bfloat16_bits(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float_to_bfloat16_bits(src[i] / divisor);
  }
}

void bfloat16_to_float(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16_bits_to_float(src[i]);
}

void divide(const float* src, float* dst, int64_t n, float divisor) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] / divisor;
}

void add_into(float* acc, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + src[i];
}

void min_max(const float* src, int64_t n, float* min, float* max,
             bool* any_nan) {
  float lo = src[0], hi = src[0];
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    float x = src[i];
    nan |= std::isnan(x);
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
  *min = lo;
  *max = hi;
  *any_nan = nan;
}

void quantize_codes(const float* src, int64_t n, float divisor, float min, float scale,
                    uint8_t* codes) {
  const bool div = divisor != 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = div ? src[i] / divisor : src[i];
    float v = (x - min) * scale;
    if (!(v > 0.0f)) v = 0.0f;  // also maps NaN to 0
    if (v > 255.0f) v = 255.0f;
    codes[i] = static_cast<uint8_t>(std::nearbyint(v));
  }
}

void dequantize_codes(const uint8_t* codes, int64_t n, float min, float step,
                      float* dst, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) {
      float x = static_cast<float>(codes[i]) * step;
      dst[i] = dst[i] + (x + min);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float x = static_cast<float>(codes[i]) * step;
      dst[i] = x + min;
    }
  }
}

}  // namespace scalar_path
}  // namespace kernels
}  // namespace ddpx
