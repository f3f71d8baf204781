#include "reducer/join.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reducer/control_tensor.h"
#include "reducer/model_sync.h"

namespace ddpx {

Join::Join(DistributedDataParallel& ddp, JoinOptions options) : ddp_(ddp), options_(options) {
  ddp_.reducer().set_join_enabled(true, options_.throw_on_early_termination);
}

Join::~Join() {
  if (joined_) return;
  absl::Status s = join();
  if (!s.ok()) fprintf(stderr, "ddpx::Join: %s\n", s.ToString().c_str());
}

absl::Status Join::join() {
  if (joined_) return absl::FailedPreconditionError("Join::join() called twice");
  joined_ = true;
  absl::Status s = run_join();
  ddp_.reducer().set_join_enabled(false, false);
  return s;
}

absl::Status Join::run_join() {
  Reducer& reducer = ddp_.reducer();
  ProcessGroup& pg = ddp_.process_group();
  bool last_to_join = true;
  while (true) {
    absl::StatusOr<std::vector<int>> active = reducer.exchange_active_ranks(false);
    if (!active.ok()) return active.status();
    if (active->empty()) break;
    last_to_join = false;
    if (options_.throw_on_early_termination) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", pg.rank(), " ran out of inputs while rank ", absl::StrJoin(*active, ", rank "),
          " still had some; throw_on_early_termination is set"));
    }
    if (absl::Status s = reducer.shadow_step(); !s.ok()) return s;
    ++shadowed_steps_;
  }
  // Joined ranks did not apply the last updates: take the model of the
  // highest rank among those that joined last (they saw every step).
  Tensor candidate = Tensor::from_vector<int32_t>({last_to_join ? pg.rank() : -1});
  AllreduceOptions max;
  max.op = ReduceOp::MAX;
  absl::Status s = run_control_collective(
      candidate, control_device(ddp_.model()),
      [&pg, &max](const Tensor& t) { return pg.allreduce({t}, max); });
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("join: electing the last rank to join: ", s.message()));
  }
  return broadcast_model_state(ddp_.model(), pg, candidate.data_as<int32_t>()[0]);
}

}  // namespace ddpx
