// One compressed PowerSGD step over a flat float32 buffer, shared by
// powerSGD_hook (layer-wise plan over the bucket) and batched_powerSGD_hook
// (one padded square over a copy of the bucket).
//
//   1. error feedback: M = input + error (the error buffer then holds M);
//   2. uncompressed tensors gathered and allreduced (SUM, then / world size);
//   3. Q taken from warm-start memory or drawn from the state's generator,
//      orthogonalized; P = M Q for every matrix; Ps allreduced (SUM);
//   4. Ps orthogonalized; Q = M^T P; Qs allreduced (SUM, then / world size);
//   5. M ~ P Q^T written into the buffer; error = M - what was applied.
//
// One pipeline, computed through DeviceKernels (cuda/device_kernels.h): on
// the CPU the host kernels (hooks/host_kernels.h: PowerSGD's streaming
// kernels, error feedback fused into P = M Q and into decompression), on a
// device that device's (powersgd_device_step.h). Same-shape matrices that
// lie back to back go to the kernels as one batch (device_matrix_groups).
// Each stage runs on the thread that completes the previous collective; no
// stage blocks on a future.
//
// float16/bfloat16 buckets (fp16_compress_wrapper(powerSGD_hook)): the step
// still computes in float32 on a widened copy, with error and warm-start
// memories in float32, but P, Q and the uncompressed batch travel in the
// bucket's dtype: narrowed just before each allreduce (the averaged ones,
// uncompressed and Q, divided by the world size in float32 first, so the
// 16-bit sum cannot overflow) and widened right after.
#ifndef DDPX_HOOKS_POWERSGD_STEP_H_
#define DDPX_HOOKS_POWERSGD_STEP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "hooks/hook_stats.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_state.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"
#include "core/tensor.h"

namespace ddpx {

struct PowerSGDStepInput {
  size_t bucket_index = 0;
  bool bucket_is_last = false;
  // Contiguous CPU float32 buffer the plan describes; rewritten in place.
  Tensor buffer;
  // What P, Q and the uncompressed batch travel as: float32 (the float32
  // path, unchanged), float16 or bfloat16.
  DType wire_dtype = DType::kFloat32;
  CompressionPlan plan;
  // Called on the completing thread once `buffer` holds the result; its
  // return value completes the step's future.
  std::function<absl::StatusOr<Tensor>()> finish;
  // Counts the bytes of every collective the step issues (may be null).
  std::shared_ptr<HookStatsCounter> counter;
};

// The step on the CPU: `buffer` a CPU float32 tensor, the host kernels, the
// bucket's memories in PowerSGDBucketMemory's host vectors (what a
// checkpoint holds). With `pg` null the step runs as on a group of one
// without communicating (every allreduce is the identity): PowerSGD's own
// work alone, for timing.
std::shared_ptr<Future<Tensor>> run_powersgd_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDStepInput input);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_STEP_H_
