// Gradient averaging on the process group alone, one allreduce per
// parameter launched from mark_ready: the `--sync=per_param` baseline (no
// buckets, no hooks) that DDP with the allreduce hook must match exactly
// (tests/integration:train_hooks_test). It carried the trainer before the
// reducer existed.
#ifndef DDPX_EXAMPLES_TRAINER_PG_ALLREDUCE_SYNC_H_
#define DDPX_EXAMPLES_TRAINER_PG_ALLREDUCE_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "examples/nn/parameter.h"
#include "examples/trainer/grad_sync.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

// Broadcasts rank 0's parameters first (as DDP does), so every rank starts
// from the same model.
absl::StatusOr<std::unique_ptr<GradientSync>> make_per_parameter_allreduce(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_PG_ALLREDUCE_SYNC_H_
