// The float32 <-> float16/bfloat16 cast kernels' per-thread work, as
// host/device code: the .cu kernels call these with their global thread index,
// and the CPU tests call them for every thread of a simulated grid, so the
// indexing, the 4-wide vector part and the scalar tail are tested without a GPU.
//
// Each element is converted by core/half.h (round to nearest even,
// NaN kept), the same scalar code the CPU hooks use.
#ifndef DDPX_CUDA_CAST_MATH_H_
#define DDPX_CUDA_CAST_MATH_H_

#include <cstdint>

#include "core/half.h"

namespace ddpx {
namespace cuda_math {

// 16-byte and 8-byte aligned groups of four elements: one vector load/store
// each on the GPU (ld.global.v4.f32 / st.global.v2.b32).
struct alignas(16) Float4 {
  float v[4];
};
struct alignas(8) Bits16x4 {
  uint16_t v[4];
};

// Elements [0, vector_elems) go four at a time; the rest one at a time. The
// vector part is used only when both pointers allow aligned vector access.
DDPX_HOST_DEVICE inline int64_t vector_elems(const void* in, const void* out,
                                             int64_t n) {
  bool aligned = (reinterpret_cast<uintptr_t>(in) % 16 == 0) &&
                 (reinterpret_cast<uintptr_t>(out) % 16 == 0);
  return aligned ? (n / 4) * 4 : 0;
}

enum class Half16 { kFloat16, kBFloat16 };

template <Half16 kind>
DDPX_HOST_DEVICE inline uint16_t to_bits16(float f) {
  return kind == Half16::kFloat16 ? float_to_half_bits(f) : float_to_bfloat16_bits(f);
}

template <Half16 kind>
DDPX_HOST_DEVICE inline float from_bits16(uint16_t b) {
  return kind == Half16::kFloat16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
}

// Grid-stride body of the float32 -> 16-bit cast: thread `thread` of
// `nthreads` converts its share of `in[0, n)` into `out`.
template <Half16 kind>
DDPX_HOST_DEVICE inline void cast_from_float_thread(const float* in, uint16_t* out,
                                                    int64_t n, int64_t thread,
                                                    int64_t nthreads) {
  int64_t nvec = vector_elems(in, out, n);
  const Float4* in4 = reinterpret_cast<const Float4*>(in);
  Bits16x4* out4 = reinterpret_cast<Bits16x4*>(out);
  for (int64_t i = thread; i < nvec / 4; i += nthreads) {
    Float4 x = in4[i];
    Bits16x4 y;
    for (int k = 0; k < 4; ++k) y.v[k] = to_bits16<kind>(x.v[k]);
    out4[i] = y;
  }
  for (int64_t i = nvec + thread; i < n; i += nthreads) out[i] = to_bits16<kind>(in[i]);
}

// Grid-stride body of the 16-bit -> float32 cast.
template <Half16 kind>
DDPX_HOST_DEVICE inline void cast_to_float_thread(const uint16_t* in, float* out,
                                                  int64_t n, int64_t thread,
                                                  int64_t nthreads) {
  int64_t nvec = vector_elems(in, out, n);
  const Bits16x4* in4 = reinterpret_cast<const Bits16x4*>(in);
  Float4* out4 = reinterpret_cast<Float4*>(out);
  for (int64_t i = thread; i < nvec / 4; i += nthreads) {
    Bits16x4 x = in4[i];
    Float4 y;
    for (int k = 0; k < 4; ++k) y.v[k] = from_bits16<kind>(x.v[k]);
    out4[i] = y;
  }
  for (int64_t i = nvec + thread; i < n; i += nthreads) out[i] = from_bits16<kind>(in[i]);
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_CAST_MATH_H_
