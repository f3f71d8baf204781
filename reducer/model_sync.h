// Making every rank's model the same: the checks and broadcasts DDP does at
// construction (and Join does at the end of uneven inputs).
#ifndef DDPX_REDUCER_MODEL_SYNC_H_
#define DDPX_REDUCER_MODEL_SYNC_H_

#include "absl/status/status.h"
#include "process_group/front_end/process_group.h"
#include "reducer/model_parameters.h"

namespace ddpx {

// Collective. Checks that every rank registered the same number of
// parameters with the same shapes, dtypes, device types and requires_grad,
// in the same order. The error (the same on every rank) names the first
// mismatching parameter, the rank that differs from rank 0, and both layouts.
// The descriptions travel on the first parameter's device (a CUDA model
// over NCCL, which takes CUDA tensors only).
absl::Status verify_parameters_across_ranks(const ModelParameters& model, ProcessGroup& pg);

// Collective. Overwrites every parameter value and buffer with rank `root`'s,
// a few large broadcasts (one per dtype and device, 256 MiB at most each).
absl::Status broadcast_model_state(ModelParameters& model, ProcessGroup& pg, int root);

}  // namespace ddpx

#endif  // DDPX_REDUCER_MODEL_SYNC_H_
