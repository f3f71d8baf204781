// The element-wise operations PowerSGD needs on a device (error feedback,
// decompression's error update, the averaging division), as per-element
// host/device functions plus the grid-stride body each thread runs.
//
// Every operation is rounded one at a time (float_ops.h), so a kernel
// computes bit for bit what hooks/powersgd_kernels.h's CPU loops compute:
// add_inplace is a + 1 * b, subtract_inplace a + (-1) * b (multiplying by
// +-1 is exact), divide_inplace x / d. tests/cuda/elementwise_math_test.cc
// replays these bodies for every thread of a grid against those CPU loops.
#ifndef DDPX_CUDA_ELEMENTWISE_MATH_H_
#define DDPX_CUDA_ELEMENTWISE_MATH_H_

#include <cstdint>

#include "cuda/float_ops.h"
#include "core/half.h"

namespace ddpx {
namespace cuda_math {

// a + alpha * b, the multiply and the add rounded separately (no FMA: with
// alpha = +-1 the product is exact and the result is the CPU's a + b / a - b).
DDPX_HOST_DEVICE inline float add_scaled(float a, float alpha, float b) {
  return add_rn(a, mul_rn(alpha, b));
}

// out[i] = a[i] + alpha * b[i] for this thread's elements (i = thread,
// thread + stride, ...). out may alias a or b (each element is read before
// it is written, by the same thread).
DDPX_HOST_DEVICE inline void add_scaled_thread(const float* a, float alpha, const float* b,
                                               float* out, int64_t n, int64_t thread,
                                               int64_t stride) {
  for (int64_t i = thread; i < n; i += stride) out[i] = add_scaled(a[i], alpha, b[i]);
}

// x[i] = x[i] / divisor (a division, as torch's div_ and the CPU hook).
DDPX_HOST_DEVICE inline void divide_thread(float* x, float divisor, int64_t n, int64_t thread,
                                           int64_t stride) {
  for (int64_t i = thread; i < n; i += stride) x[i] = div_rn(x[i], divisor);
}

// x[i] = value.
DDPX_HOST_DEVICE inline void fill_thread(float* x, float value, int64_t n, int64_t thread,
                                         int64_t stride) {
  for (int64_t i = thread; i < n; i += stride) x[i] = value;
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_ELEMENTWISE_MATH_H_
