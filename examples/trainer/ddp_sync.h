// Gradient averaging through DistributedDataParallel (reducer/) with an
// optional communication hook: the trainer's production path.
#ifndef DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_
#define DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "examples/nn/parameter.h"
#include "examples/trainer/grad_sync.h"
#include "hooks/comm_hook.h"
#include "process_group/process_group.h"
#include "reducer/distributed_data_parallel.h"

namespace ddpx::trainer {

// Collective (every rank calls it): builds DDP over `params` (broadcasting
// rank 0's values) and registers `hook` unless it is null (DDP's built-in
// allreduce then).
absl::StatusOr<std::unique_ptr<GradientSync>> make_ddp_sync(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg,
    const DDPOptions& options, std::unique_ptr<CommHook> hook);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_
