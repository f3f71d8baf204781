// Float operations rounded one at a time, on host and device alike.
//
// nvcc contracts a * b + c into one fused multiply-add by default, which
// rounds once instead of twice; the CPU kernels round every operation. The
// kernels use these helpers wherever a result must match the CPU bit for bit.
#ifndef DDPX_CUDA_FLOAT_OPS_H_
#define DDPX_CUDA_FLOAT_OPS_H_

#include <math.h>

#include "core/half.h"

namespace ddpx {
namespace cuda_math {

DDPX_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

DDPX_HOST_DEVICE inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

DDPX_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

DDPX_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

DDPX_HOST_DEVICE inline double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

DDPX_HOST_DEVICE inline double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// Round to nearest integer, ties to even (the default rounding mode).
DDPX_HOST_DEVICE inline float round_even(float v) { return rintf(v); }

DDPX_HOST_DEVICE inline bool is_nan(float v) { return v != v; }
DDPX_HOST_DEVICE inline bool is_finite(float v) {
  return !is_nan(v) && v - v == 0.0f;  // inf - inf is NaN
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_FLOAT_OPS_H_
