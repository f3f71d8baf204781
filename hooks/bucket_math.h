// Element-wise work the hooks do on bucket buffers: dividing by the world
// size and casting between float32 and the 16-bit floats, through the
// kernels of the buffer's device (kernels_for: the host kernels for a CPU
// buffer, cuda/device_kernels.h's for a CUDA one; a build without CUDA
// kernels fails with an error saying so). Errors name the hook (`what`),
// the dtype and the device.
#ifndef DDPX_HOOKS_BUCKET_MATH_H_
#define DDPX_HOOKS_BUCKET_MATH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/device_kernels.h"
#include "core/tensor.h"

namespace ddpx {

// t = t / divisor, element-wise (float32, float16, bfloat16, and float64 on
// the CPU; the 16-bit types divide in float32 and round to nearest even, as
// torch does).
absl::Status divide_in_place(const Tensor& t, int divisor, const std::string& what);

// A new flat tensor of `dtype` on src's device holding src / divisor,
// rounded once. src is float32 (narrowed to float16/bfloat16) or already
// `dtype` (then a divided copy).
absl::StatusOr<Tensor> cast_divided(const Tensor& src, DType dtype, int divisor,
                                    const std::string& what);

// dst = src converted to dst's dtype (float16/bfloat16 -> float32 through the
// kernels; equal dtypes copy). Same element count required. Returns once
// the bytes are in place (a device's work is synchronized), so a future
// completed after it holds the final values.
absl::Status copy_converted(const Tensor& dst, const Tensor& src,
                            const std::string& what);

// The kernels every hook computes through for `t`: host_kernels()
// (hooks/host_kernels.h) on the CPU, else those registered for its device,
// or an error naming the hook and the device: "fp16 hook: bucket buffer is
// on cuda:0 but this build has no CUDA kernels (build with --config=cuda
// and link //cuda)".
absl::StatusOr<DeviceKernels*> kernels_for(const Tensor& t, const std::string& what);

}  // namespace ddpx

#endif  // DDPX_HOOKS_BUCKET_MATH_H_
