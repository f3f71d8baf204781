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
// One pipeline, computed through the kernels of the buffer's device
// (kernels_for() in bucket_math.h): on the CPU the host kernels
// (hooks/host_kernels.h: PowerSGD's streaming kernels, error feedback fused
// into P = M Q and into decompression), on a CUDA device the CUDA kernels
// (cuBLAS products, the Gram-Schmidt kernel, element-wise kernels; only a
// fresh Q is drawn on the host, from the same generator, and copied over).
// Same-shape matrices that lie back to back go to the kernels as one batch
// (matrix_groups in powersgd_plan.h). Each stage runs on the thread that
// completes the previous collective; no stage blocks on a future.
//
// Stream order on a device: every kernel goes to the current stream of the
// thread that runs the stage. A collective waits for the issuing thread's
// stream and the next stage starts only once it completed, so work queued
// by an earlier stage on another thread's stream is done by then. The last
// stage waits for its stream (synchronize()) before the future completes:
// the bucket then holds the result.
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

#include "cuda/device_kernels.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_state.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"
#include "core/tensor.h"

namespace ddpx {

// Where a step keeps the bucket's error and P/Q memories.
enum class PowerSGDMemories {
  // In PowerSGDBucketMemory's host vectors for a CPU buffer (what a
  // checkpoint holds), in its device_* tensors beside a device buffer.
  kWhereTheBufferIs,
  // In the device_* tensors wherever the buffer is: a device's layout, which
  // the tests run on the CPU.
  kTensors,
};

struct PowerSGDStepInput {
  size_t bucket_index = 0;
  bool bucket_is_last = false;
  // Contiguous float32 buffer the plan describes, on the CPU or a device
  // (the bucket itself, a float32 copy of a 16-bit bucket, or the batched
  // hook's padded square); rewritten in place.
  Tensor buffer;
  // What P, Q and the uncompressed batch travel as: float32 (the float32
  // path, unchanged), float16 or bfloat16.
  DType wire_dtype = DType::kFloat32;
  CompressionPlan plan;
  // Called on the completing thread once `buffer` holds the result; its
  // return value completes the step's future. It may queue device work (a
  // cast back into the bucket): the step synchronizes after it.
  std::function<absl::StatusOr<Tensor>()> finish;
  // Counts the bytes of every collective the step issues (may be null).
  std::shared_ptr<HookStatsCounter> counter;
  // The kernels the step computes through; null takes kernels_for(buffer).
  // Any DeviceKernels that handles the buffer's tensors will do (the tests
  // count the host kernels' calls).
  DeviceKernels* kernels = nullptr;
  PowerSGDMemories memories = PowerSGDMemories::kWhereTheBufferIs;
};

// With `pg` null the step runs as on a group of one without communicating
// (every allreduce is the identity): PowerSGD's own work alone, for timing.
std::shared_ptr<Future<Tensor>> run_powersgd_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDStepInput input);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_STEP_H_
