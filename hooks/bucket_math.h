// Element-wise work the hooks do on bucket buffers: dividing by the world
// size and casting between float32 and the 16-bit floats, through the
// vectorized kernels where the dtype allows. Buffers on another device
// (CUDA) go to that device's DeviceKernels (cuda/device_kernels.h); a build
// without them fails with an error saying so. Errors name the hook (`what`),
// the dtype and the device.
#ifndef DDPX_HOOKS_BUCKET_MATH_H_
#define DDPX_HOOKS_BUCKET_MATH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/device_kernels.h"
#include "core/tensor.h"

namespace ddpx {

// t = t / divisor, element-wise (float32, float64, float16, bfloat16; the
// 16-bit types divide in float32 and round to nearest even, as torch does).
// CPU only: DeviceKernels has no division (device callers divide in the
// collective, ReduceOp::AVG).
absl::Status divide_in_place(const Tensor& t, int divisor, const std::string& what);

// A new flat tensor of `dtype` holding src / divisor, rounded once. src is
// float32 (any target) or already `dtype` (then a divided copy). On a device
// the result is on src's device, and divisor must be 1.
absl::StatusOr<Tensor> cast_divided(const Tensor& src, DType dtype, int divisor,
                                    const std::string& what);

// dst = src converted to dst's dtype (float16/bfloat16 -> float32 through the
// kernels; equal dtypes copy). Same element count required. On a device,
// returns once the bytes are in place (the cast is synchronized), so a
// future completed after it holds the final values, as on the CPU.
absl::Status copy_converted(const Tensor& dst, const Tensor& src,
                            const std::string& what);

// OK if `t` is a defined CPU tensor.
absl::Status check_cpu(const Tensor& t, const std::string& what);

// The kernels for `t`'s (non-CPU) device, or an error naming the hook and
// the device: "fp16 hook: bucket buffer is on cuda:0 but this build has no
// CUDA kernels (build with --config=cuda and link //cuda)".
absl::StatusOr<DeviceKernels*> kernels_for(const Tensor& t, const std::string& what);

}  // namespace ddpx

#endif  // DDPX_HOOKS_BUCKET_MATH_H_
