// Gradient averaging through DistributedDataParallel (reducer/) with an
// optional communication hook: the trainer's production path.
#ifndef DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_
#define DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "examples/nn/parameter.h"
#include "examples/trainer/grad_sync.h"
#include "examples/trainer/timed_backend.h"
#include "hooks/comm_hook.h"
#include "process_group/front_end/process_group.h"
#include "reducer/distributed_data_parallel.h"

namespace ddpx::trainer {

// Collective (every rank calls it): builds DDP over `params` (broadcasting
// rank 0's values) and registers `hook` unless it is null (DDP's built-in
// allreduce then). The hook's bucket spans (timed_hook.h) are reported in
// SyncStats::comm_spans; when `timed` is the backend under `pg`
// (TimedBackend::wrap), its collective spans in SyncStats::collective_spans.
absl::StatusOr<std::unique_ptr<GradientSync>> make_ddp_sync(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg,
    const DDPOptions& options, std::unique_ptr<CommHook> hook,
    std::shared_ptr<TimedBackend> timed = nullptr);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_DDP_SYNC_H_
