// Int8 min-max quantization (Bagua's ByteGrad: Bagua's "Low Precision
// Stochastic Gradient" documentation; Gan et al., VLDB 2022) as host/device
// code: the one description of the record format and its arithmetic, which
// the CPU kernels (hooks/kernels/cpu_kernels.h, vectorized) and the CUDA
// kernels (split into the pieces each thread runs) both follow.
// tests/cuda/quantize_math_test.cc replays a whole grid on the CPU and
// compares the bytes with the CPU hook kernels.
//
// Layout: `n` floats cut into chunks of `chunk` elements (the last may be
// shorter); chunk c becomes the record
//   offset 0: float32 min (little endian, IEEE binary32)
//   offset 4: float32 max
//   offset 8: one uint8 code per element, code i for element i
// and the records lie back to back, so chunk c starts at byte
// c * (chunk + 8). One chunk (chunk >= n) is one record of 8 + n bytes.
//
// Arithmetic, each float operation rounded separately (float_ops.h; a CUDA
// kernel uses __fmul_rn/__fadd_rn/__fdiv_rn, the CPU -ffp-contract=off):
//   min, max = the chunk's minimum and maximum, each plus 0.0f (so -0 is
//              stored as +0); both the one quiet NaN if any element is NaN;
//              {0, 0} for an empty chunk
//   scale    = 255 / ((max - min) + kQuantizeEpsilon)
//   code     = v = (x - min) * scale; v = 0 if !(v > 0); v = 255 if v > 255;
//              v rounded to nearest, ties to even
//   step     = ((max - min) + kQuantizeEpsilon) / 255
//   decode   = code * step + min, NaN everywhere if min or max is not
//              finite (the chunk held NaN or inf: bad gradients stay
//              visibly bad instead of turning into plausible numbers)
// so |x - decode| <= step / 2 (plus float rounding).
#ifndef DDPX_CUDA_QUANTIZE_MATH_H_
#define DDPX_CUDA_QUANTIZE_MATH_H_

#include <stdint.h>
#include <string.h>

#include "cuda/float_ops.h"

namespace ddpx {
namespace cuda_math {

inline constexpr float kQuantizeEpsilon = 1e-7f;
inline constexpr int64_t kQuantizedHeaderBytes = 8;

DDPX_HOST_DEVICE inline int64_t quantized_records(int64_t n, int64_t chunk) {
  return (n + chunk - 1) / chunk;
}
// Bytes of the quantized form of n floats cut into chunks of `chunk`.
DDPX_HOST_DEVICE inline int64_t quantized_bytes(int64_t n, int64_t chunk) {
  return n + kQuantizedHeaderBytes * quantized_records(n, chunk);
}
DDPX_HOST_DEVICE inline int64_t record_offset(int64_t record, int64_t chunk) {
  return record * (chunk + kQuantizedHeaderBytes);
}
// Elements in record `record`.
DDPX_HOST_DEVICE inline int64_t record_elems(int64_t record, int64_t n, int64_t chunk) {
  int64_t left = n - record * chunk;
  return left < chunk ? left : chunk;
}

struct MinMaxPair {
  float min;
  float max;
};

DDPX_HOST_DEVICE inline MinMaxPair minmax_identity() {
  return MinMaxPair{bits_float(0x7f800000u), bits_float(0xff800000u)};  // {+inf, -inf}
}

// NaN wins, so one NaN element makes both bounds NaN whatever the order of
// the reduction.
DDPX_HOST_DEVICE inline MinMaxPair minmax_combine(MinMaxPair a, MinMaxPair b) {
  MinMaxPair r;
  r.min = is_nan(a.min) ? a.min : (is_nan(b.min) || b.min < a.min) ? b.min : a.min;
  r.max = is_nan(a.max) ? a.max : (is_nan(b.max) || b.max > a.max) ? b.max : a.max;
  return r;
}

DDPX_HOST_DEVICE inline MinMaxPair minmax_of(float x) { return MinMaxPair{x, x}; }

// What the header stores: -0 becomes +0, NaN becomes the one quiet NaN the
// CPU kernels write, and an empty chunk is {0, 0}.
DDPX_HOST_DEVICE inline MinMaxPair minmax_finish(MinMaxPair p, int64_t n) {
  if (n == 0) return MinMaxPair{0.0f, 0.0f};
  if (is_nan(p.min) || is_nan(p.max)) {
    float nan = bits_float(0x7fc00000u);
    return MinMaxPair{nan, nan};
  }
  return MinMaxPair{add_rn(p.min, 0.0f), add_rn(p.max, 0.0f)};
}

// The min/max over elements thread, thread + nthreads, ... of x[0, n).
DDPX_HOST_DEVICE inline MinMaxPair minmax_thread(const float* x, int64_t n,
                                                 int64_t thread, int64_t nthreads) {
  MinMaxPair acc = minmax_identity();
  for (int64_t i = thread; i < n; i += nthreads) acc = minmax_combine(acc, minmax_of(x[i]));
  return acc;
}

DDPX_HOST_DEVICE inline float quantize_range(MinMaxPair h) {
  return add_rn(sub_rn(h.max, h.min), kQuantizeEpsilon);
}
DDPX_HOST_DEVICE inline float quantize_scale(MinMaxPair h) {
  return div_rn(255.0f, quantize_range(h));
}
DDPX_HOST_DEVICE inline float dequantize_step(MinMaxPair h) {
  return div_rn(quantize_range(h), 255.0f);
}

DDPX_HOST_DEVICE inline uint8_t quantize_code(float x, float min, float scale) {
  float v = mul_rn(sub_rn(x, min), scale);
  if (!(v > 0.0f)) v = 0.0f;
  if (v > 255.0f) v = 255.0f;
  return static_cast<uint8_t>(round_even(v));
}

DDPX_HOST_DEVICE inline float dequantize_value(uint8_t code, MinMaxPair h, float step) {
  if (!is_finite(h.min) || !is_finite(h.max)) return bits_float(0x7fc00000u);
  return add_rn(mul_rn(static_cast<float>(code), step), h.min);
}

DDPX_HOST_DEVICE inline void write_header(uint8_t* record, MinMaxPair h) {
  memcpy(record, &h.min, 4);
  memcpy(record + 4, &h.max, 4);
}
DDPX_HOST_DEVICE inline MinMaxPair read_header(const uint8_t* record) {
  MinMaxPair h;
  memcpy(&h.min, record, 4);
  memcpy(&h.max, record + 4, 4);
  return h;
}

// Grid-stride body of the code pass (headers already written): element i of
// in[0, n) becomes its code in its record.
DDPX_HOST_DEVICE inline void quantize_codes_thread(const float* in, int64_t n,
                                                   int64_t chunk, uint8_t* out,
                                                   int64_t thread, int64_t nthreads) {
  for (int64_t i = thread; i < n; i += nthreads) {
    int64_t record = i / chunk;
    uint8_t* rec = out + record_offset(record, chunk);
    MinMaxPair h = read_header(rec);
    rec[kQuantizedHeaderBytes + (i - record * chunk)] =
        quantize_code(in[i], h.min, quantize_scale(h));
  }
}

// Grid-stride body of decoding; with accumulate, adds into out.
DDPX_HOST_DEVICE inline void dequantize_thread(const uint8_t* in, int64_t n,
                                               int64_t chunk, float* out,
                                               bool accumulate, int64_t thread,
                                               int64_t nthreads) {
  for (int64_t i = thread; i < n; i += nthreads) {
    int64_t record = i / chunk;
    const uint8_t* rec = in + record_offset(record, chunk);
    MinMaxPair h = read_header(rec);
    float v = dequantize_value(rec[kQuantizedHeaderBytes + (i - record * chunk)], h,
                               dequantize_step(h));
    out[i] = accumulate ? add_rn(out[i], v) : v;
  }
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_QUANTIZE_MATH_H_
