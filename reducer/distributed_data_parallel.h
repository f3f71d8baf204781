// DistributedDataParallel: what a training loop holds on to.
//
//   ModelParameters model;                 // the model registers into this
//   auto ddp = DistributedDataParallel::create(model, pg, {}).value();
//   for each batch:
//     forward(...);
//     ddp->prepare_for_backward();         // optional
//     backward(...);                       // calls ddp->mark_ready(i) per parameter
//     ddp->finalize_backward();            // grads now averaged over ranks
//     sgd_step(model); model.zero_grad();
//
// Construction checks that every rank registered the same parameters
// (naming the first mismatch and rank), broadcasts parameters and buffers
// from rank 0 so all replicas start equal, and builds the Reducer.
#ifndef DDPX_REDUCER_DISTRIBUTED_DATA_PARALLEL_H_
#define DDPX_REDUCER_DISTRIBUTED_DATA_PARALLEL_H_

#include <iosfwd>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "process_group/front_end/process_group.h"
#include "reducer/model_parameters.h"
#include "reducer/reducer.h"

namespace ddpx {

using DDPOptions = ReducerOptions;

class DistributedDataParallel {
 public:
  // Collective: every rank of `pg` calls it. `model` must outlive the DDP.
  static absl::StatusOr<std::unique_ptr<DistributedDataParallel>> create(
      ModelParameters& model, std::shared_ptr<ProcessGroup> pg, const DDPOptions& options = {});

  // Once per model; a second call is an error naming both hooks.
  absl::Status register_comm_hook(std::unique_ptr<CommHook> hook) {
    return reducer_->register_comm_hook(std::move(hook));
  }
  // Checkpoint the hook's state (PowerSGD's error feedback, Qs, iteration).
  absl::Status save_hook_state(std::ostream& out) const { return reducer_->save_hook_state(out); }
  absl::Status load_hook_state(std::istream& in) { return reducer_->load_hook_state(in); }

  absl::Status prepare_for_backward(const std::vector<size_t>& unused_params = {}) {
    return reducer_->prepare_for_backward(unused_params);
  }
  absl::Status mark_ready(size_t param_index) { return reducer_->mark_ready(param_index); }
  absl::Status finalize_backward() { return reducer_->finalize_backward(); }

  // While a NoSyncGuard lives, steps accumulate gradients locally; the first
  // step after it averages the accumulated sum (torch's `with ddp.no_sync()`).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Reducer& reducer)
        : reducer_(&reducer), previous_(reducer.require_grad_sync()) {
      reducer.set_require_grad_sync(false);
    }
    ~NoSyncGuard() {
      if (reducer_) reducer_->set_require_grad_sync(previous_);
    }
    NoSyncGuard(NoSyncGuard&& o) noexcept : reducer_(o.reducer_), previous_(o.previous_) {
      o.reducer_ = nullptr;
    }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    Reducer* reducer_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

  const ReducerStats& stats() const { return reducer_->last_stats(); }
  Reducer& reducer() { return *reducer_; }
  ModelParameters& model() { return model_; }
  ProcessGroup& process_group() { return *pg_; }
  const std::shared_ptr<ProcessGroup>& process_group_ptr() const { return pg_; }

 private:
  DistributedDataParallel(ModelParameters& model, std::shared_ptr<ProcessGroup> pg,
                          std::unique_ptr<Reducer> reducer)
      : model_(model), pg_(std::move(pg)), reducer_(std::move(reducer)) {}

  ModelParameters& model_;
  std::shared_ptr<ProcessGroup> pg_;
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace ddpx

#endif  // DDPX_REDUCER_DISTRIBUTED_DATA_PARALLEL_H_
