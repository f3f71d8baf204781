// The two implementations behind cpu_kernels.h; only cpu_kernels.cc calls
// them. Each function does the per-element loop of its public counterpart;
// headers, argument checks and the choice of path live in cpu_kernels.cc.
#ifndef DDPX_HOOKS_KERNELS_KERNEL_PATHS_H_
#define DDPX_HOOKS_KERNELS_KERNEL_PATHS_H_

#include <cstdint>

#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace kernels {

#define DDPX_KERNEL_PATH_DECLS                                               \
  void float_to_half(const float* src, uint16_t* dst, int64_t n,             \
                     float divisor);                                         \
  void half_to_float(const uint16_t* src, float* dst, int64_t n);            \
  void float_to_bfloat16(const float* src, uint16_t* dst, int64_t n,         \
                         float divisor);                                     \
  void bfloat16_to_float(const uint16_t* src, float* dst, int64_t n);        \
  /* dst[i] = src[i] / divisor; src may be dst. */                          \
  void divide(const float* src, float* dst, int64_t n, float divisor);       \
  void add_into(float* acc, const float* src, int64_t n);                    \
  /* min/max before canonicalization; any_nan set if an element is NaN. */  \
  void min_max(const float* src, int64_t n, float* min, float* max,          \
               bool* any_nan);                                               \
  /* codes of src[i] / divisor (no division when divisor is 1). */          \
  void quantize_codes(const float* src, int64_t n, float divisor, float min, \
                      float scale, uint8_t* codes);                          \
  /* accumulate: dst += decoded instead of dst = decoded. */                 \
  void dequantize_codes(const uint8_t* codes, int64_t n, float min,          \
                        float step, float* dst, bool accumulate);

namespace scalar_path {
DDPX_KERNEL_PATH_DECLS
}  // namespace scalar_path

#if defined(__x86_64__)
namespace avx2_path {
DDPX_KERNEL_PATH_DECLS
}  // namespace avx2_path
#endif

#undef DDPX_KERNEL_PATH_DECLS

}  // namespace kernels
}  // namespace ddpx

#endif  // DDPX_HOOKS_KERNELS_KERNEL_PATHS_H_
