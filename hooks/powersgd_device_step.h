// The PowerSGD step (powersgd_step.h) on a bucket that lives on a device
// (CUDA): the same pipeline, computed there through the device's
// DeviceKernels (cuda/device_kernels.h), with
//
//   - error feedback, the packing of uncompressed tensors, the averaging
//     division and the error update as device element-wise kernels;
//   - P = M Q, Q = M^T P and M ~ P Q^T through the kernels' matmul (cuBLAS),
//     one strided-batched call for same-shape matrices that lie back to back
//     in the bucket (device_matrix_groups);
//   - P and Q orthogonalized by the Gram-Schmidt kernel, one launch per
//     group of same-shape matrices;
//   - error, P and Q memories on the device (PowerSGDBucketMemory::device_*);
//     only a fresh Q is drawn on the host (the same generator as the CPU
//     step, as torch draws it on the CPU) and copied over;
//   - the collectives on the device tensors themselves (NCCL); a 16-bit wire
//     is narrowed and widened by the device cast kernels.
//
// Stream order: every kernel goes to the current stream of the thread that
// runs the stage. A collective waits for the issuing thread's stream and the
// next stage starts only once it completed, so work queued by an earlier
// stage on another thread's stream is done by then. The last stage waits for
// its stream before the future completes: the bucket then holds the result.
//
// The kernels are a parameter, not looked up, so the same code runs on the
// CPU with any DeviceKernels that handles CPU tensors (the tests do that,
// with the host kernels); the memories then still live as tensors beside
// the buffer, as on a device.
#ifndef DDPX_HOOKS_POWERSGD_DEVICE_STEP_H_
#define DDPX_HOOKS_POWERSGD_DEVICE_STEP_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "cuda/device_kernels.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_state.h"
#include "hooks/powersgd_step.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"
#include "core/tensor.h"

namespace ddpx {

// The CPU step's input (powersgd_step.h), with `buffer` a contiguous
// float32 buffer on the kernels' device (the bucket itself, a float32 copy
// of a 16-bit bucket, or the batched hook's padded square). `finish` may
// queue device work (a cast back into the bucket): the step waits for the
// stream after it, then completes the future with its value.
struct PowerSGDDeviceStepInput : PowerSGDStepInput {
  DeviceKernels* kernels = nullptr;  // required
};

// With `pg` null the step runs as on a group of one without communicating.
std::shared_ptr<Future<Tensor>> run_powersgd_device_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDDeviceStepInput input);

// ---- a bucket's dtype <-> the float32 work buffer ---------------------------
// Through `k`, the kernels of the bucket's device (host_kernels() for a CPU
// bucket): both hooks use these on either side.
// `into` (float32, on the bucket's device, at least bucket.numel() elements)
// receives the bucket's values: a copy, or widened from float16/bfloat16.
// Any other dtype is an error naming `what` and the bucket.
absl::Status device_load_bucket(const Tensor& bucket, const Tensor& into, DeviceKernels& k,
                                const std::string& what);
// The float32 buffer a device step works on: a float32 bucket itself, or a
// widened copy of a float16/bfloat16 one.
absl::StatusOr<Tensor> device_float32_work(const Tensor& bucket, DeviceKernels& k,
                                           const std::string& what);
// bucket = work[0..bucket.numel()) in the bucket's dtype (rounded to nearest
// even); nothing to do when the bucket is the work buffer itself.
absl::Status device_store_result(const Tensor& work, const Tensor& bucket, DeviceKernels& k);

// Same-shape matrices of a plan that the device handles in one call each
// (one strided-batched GEMM per product, one Gram-Schmidt launch per
// factor): a run of consecutive plan entries with one (rows, cols, rank)
// whose matrices lie back to back in the bucket and whose P and Q blocks
// lie back to back in the factor memories.
struct MatrixGroup {
  size_t first = 0;  // index into plan.matrices
  int64_t count = 0;
};
std::vector<MatrixGroup> device_matrix_groups(const CompressionPlan& plan);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_DEVICE_STEP_H_
