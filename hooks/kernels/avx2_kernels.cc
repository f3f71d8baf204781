// The AVX2 + F16C path. Each function is compiled for those extensions alone
// (target attribute), so the rest of the binary runs on any x86-64; it is
// only called after cpu_kernels.cc has checked the CPU. Tails shorter than a
// vector go through the scalar path, which computes the same values.
//
// Where the hardware differs from half.h, lanes are patched: F16C keeps a
// NaN's payload (half.h drops it), so NaN lanes are rewritten to half.h's
// canonical quiet NaN in both directions.
#if defined(__x86_64__)

#include <immintrin.h>

#include "hooks/kernels/kernel_paths.h"

#define DDPX_AVX2 __attribute__((target("avx2,f16c")))

namespace ddpx {
namespace kernels {
namespace avx2_path {
namespace {

// float32 x 8 -> float16 bits x 8, rounding like float_to_half_bits.
DDPX_AVX2 inline __m128i to_half8(__m256 x) {
  __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 nan_mask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan_mask) == 0) return h;
  // NaN lanes: sign | 0x7e00.
  __m256i bits = _mm256_castps_si256(x);
  __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 16),
                                  _mm256_set1_epi32(0x8000));
  __m256i canon = _mm256_or_si256(sign, _mm256_set1_epi32(0x7e00));
  __m128i canon16 = _mm_packus_epi32(_mm256_castsi256_si128(canon),
                                     _mm256_extracti128_si256(canon, 1));
  __m256i m = _mm256_castps_si256(nan_mask);
  __m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m),
                                _mm256_extracti128_si256(m, 1));
  return _mm_blendv_epi8(h, canon16, m16);
}

// float16 bits x 8 -> float32 x 8, like half_bits_to_float.
DDPX_AVX2 inline __m256 from_half8(__m128i h) {
  __m256 f = _mm256_cvtph_ps(h);
  __m256i wide = _mm256_cvtepu16_epi32(h);
  // NaN: exponent all ones and a non-zero mantissa.
  __m256i abs = _mm256_and_si256(wide, _mm256_set1_epi32(0x7fff));
  __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7c00));
  if (_mm256_testz_si256(is_nan, is_nan)) return f;
  // half.h: sign | 0x7f800000 | mant << 13 (no quiet bit forced).
  __m256i sign = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x8000)), 16);
  __m256i mant = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x3ff)), 13);
  __m256i nan_bits = _mm256_or_si256(_mm256_or_si256(sign, mant),
                                     _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_ps(f, _mm256_castsi256_ps(nan_bits),
                          _mm256_castsi256_ps(is_nan));
}

// float32 x 8 -> bfloat16 bits in the low halves of 8 int32 lanes.
DDPX_AVX2 inline __m256i to_bf16_lanes(__m256 x) {
  __m256i bits = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  __m256i out = _mm256_srli_epi32(rounded, 16);
  __m256i nan_mask = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  __m256i nan_out = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(out, nan_out, nan_mask);
}

DDPX_AVX2 inline __m256 maybe_divide(__m256 x, __m256 d, bool divide) {
  return divide ? _mm256_div_ps(x, d) : x;
}

// 8 quantization codes of p[i] (divided by `d` if `div`) as int32 lanes.
DDPX_AVX2 inline __m256i code8(const float* p, __m256 d, bool div, __m256 min, __m256 scale) {
  const __m256 x = maybe_divide(_mm256_loadu_ps(p), d, div);
  __m256 v = _mm256_mul_ps(_mm256_sub_ps(x, min), scale);
  v = _mm256_max_ps(v, _mm256_setzero_ps());  // NaN in the first operand -> 0
  v = _mm256_min_ps(v, _mm256_set1_ps(255.0f));
  v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_cvttps_epi32(v);
}

}  // namespace

DDPX_AVX2 void float_to_half(const float* src, uint16_t* dst, int64_t n,
                             float divisor) {
  const bool div = divisor != 1.0f;
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = maybe_divide(_mm256_loadu_ps(src + i), d, div);
    __m256 b = maybe_divide(_mm256_loadu_ps(src + i + 8), d, div);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), to_half8(a));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), to_half8(b));
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = maybe_divide(_mm256_loadu_ps(src + i), d, div);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), to_half8(a));
  }
  scalar_path::float_to_half(src + i, dst + i, n - i, divisor);
}

DDPX_AVX2 void half_to_float(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, from_half8(h));
  }
  scalar_path::half_to_float(src + i, dst + i, n - i);
}

DDPX_AVX2 void float_to_bfloat16(const float* src, uint16_t* dst, int64_t n,
                                 float divisor) {
  const bool div = divisor != 1.0f;
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = to_bf16_lanes(maybe_divide(_mm256_loadu_ps(src + i), d, div));
    __m256i b = to_bf16_lanes(maybe_divide(_mm256_loadu_ps(src + i + 8), d, div));
    // packus interleaves 128-bit lanes; permute back to element order.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  scalar_path::float_to_bfloat16(src + i, dst + i, n - i, divisor);
}

DDPX_AVX2 void bfloat16_to_float(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(wide));
  }
  scalar_path::bfloat16_to_float(src + i, dst + i, n - i);
}

DDPX_AVX2 void divide(const float* src, float* dst, int64_t n, float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_div_ps(_mm256_loadu_ps(src + i), d));
  scalar_path::divide(src + i, dst + i, n - i, divisor);
}

DDPX_AVX2 void add_into(float* acc, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i),
                                            _mm256_loadu_ps(src + i)));
  }
  scalar_path::add_into(acc + i, src + i, n - i);
}

DDPX_AVX2 void min_max(const float* src, int64_t n, float* min, float* max,
                       bool* any_nan) {
  if (n < 32) {
    scalar_path::min_max(src, n, min, max, any_nan);
    return;
  }
  // Four independent accumulators keep the min/max latency chains apart.
  __m256 lo[4], hi[4], nan = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_loadu_ps(src + 8 * k);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      __m256 x = _mm256_loadu_ps(src + i + 8 * k);
      lo[k] = _mm256_min_ps(lo[k], x);
      hi[k] = _mm256_max_ps(hi[k], x);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
  }
  __m256 l = _mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3]));
  __m256 h = _mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3]));
  alignas(32) float lv[8], hv[8];
  _mm256_store_ps(lv, l);
  _mm256_store_ps(hv, h);
  float rl, rh;
  bool tail_nan = false;
  if (i < n) {
    scalar_path::min_max(src + i, n - i, &rl, &rh, &tail_nan);
  } else {
    rl = lv[0];
    rh = hv[0];
  }
  for (int k = 0; k < 8; ++k) {
    rl = lv[k] < rl ? lv[k] : rl;
    rh = hv[k] > rh ? hv[k] : rh;
  }
  *min = rl;
  *max = rh;
  *any_nan = tail_nan || _mm256_movemask_ps(nan) != 0;
}

DDPX_AVX2 void quantize_codes(const float* src, int64_t n, float divisor, float min,
                              float scale, uint8_t* codes) {
  const bool div = divisor != 1.0f;
  const __m256 d = _mm256_set1_ps(divisor);
  const __m256 vmin = _mm256_set1_ps(min);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i a = code8(src + i, d, div, vmin, vscale);
    __m256i b = code8(src + i + 8, d, div, vmin, vscale);
    __m256i c = code8(src + i + 16, d, div, vmin, vscale);
    __m256i e = code8(src + i + 24, d, div, vmin, vscale);
    __m256i ab = _mm256_packs_epi32(a, b);
    __m256i cd = _mm256_packs_epi32(c, e);
    __m256i bytes = _mm256_packus_epi16(ab, cd);
    bytes = _mm256_permutevar8x32_epi32(bytes, order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), bytes);
  }
  scalar_path::quantize_codes(src + i, n - i, divisor, min, scale, codes + i);
}

DDPX_AVX2 void dequantize_codes(const uint8_t* codes, int64_t n, float min,
                                float step, float* dst, bool accumulate) {
  const __m256 vmin = _mm256_set1_ps(min);
  const __m256 vstep = _mm256_set1_ps(step);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i));
    __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
    x = _mm256_add_ps(_mm256_mul_ps(x, vstep), vmin);
    if (accumulate) x = _mm256_add_ps(_mm256_loadu_ps(dst + i), x);
    _mm256_storeu_ps(dst + i, x);
  }
  scalar_path::dequantize_codes(codes + i, n - i, min, step, dst + i, accumulate);
}

}  // namespace avx2_path
}  // namespace kernels
}  // namespace ddpx

#endif  // defined(__x86_64__)
