#include "reducer/distributed_data_parallel.h"

#include "reducer/model_sync.h"

namespace ddpx {

absl::StatusOr<std::unique_ptr<DistributedDataParallel>> DistributedDataParallel::create(
    ModelParameters& model, std::shared_ptr<ProcessGroup> pg, const DDPOptions& options) {
  if (pg == nullptr) return absl::InvalidArgumentError("DDP: process group is null");
  if (absl::Status s = verify_parameters_across_ranks(model, *pg); !s.ok()) return s;
  if (absl::Status s = broadcast_model_state(model, *pg, /*root=*/0); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Reducer>> reducer = Reducer::create(model, pg, options);
  if (!reducer.ok()) return reducer.status();
  return std::unique_ptr<DistributedDataParallel>(
      new DistributedDataParallel(model, std::move(pg), std::move(*reducer)));
}

}  // namespace ddpx
