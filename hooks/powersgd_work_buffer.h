// A PowerSGD bucket's dtype to and from the float32 buffer a step works on
// (powersgd_step.h), through the kernels of the bucket's device
// (kernels_for() in bucket_math.h: the host kernels for a CPU bucket). Both
// hooks use these on either side of a step.
#ifndef DDPX_HOOKS_POWERSGD_WORK_BUFFER_H_
#define DDPX_HOOKS_POWERSGD_WORK_BUFFER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "cuda/device_kernels.h"

namespace ddpx {

// `into` (float32, on the bucket's device, at least bucket.numel() elements)
// receives the bucket's values: a copy, or widened from float16/bfloat16.
// Any other dtype is an error naming `what` and the bucket.
absl::Status load_bucket(const Tensor& bucket, const Tensor& into, DeviceKernels& k,
                         const std::string& what);
// The float32 buffer a step works on: a float32 bucket itself, or a widened
// copy of a float16/bfloat16 one.
absl::StatusOr<Tensor> float32_work(const Tensor& bucket, DeviceKernels& k,
                                    const std::string& what);
// bucket = work[0..bucket.numel()) in the bucket's dtype (rounded to nearest
// even); nothing to do when the bucket is the work buffer itself.
absl::Status store_result(const Tensor& work, const Tensor& bucket, DeviceKernels& k);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_WORK_BUFFER_H_
