// Allreduce across hosts in two levels, for a group that spans several hosts
// with several ranks each (the same number on every host): reduce-scatter
// inside the host (shared memory), allreduce of each slice among the ranks
// with the same local rank across hosts (so every local rank carries 1/L of
// the data over the host's uplink, all at once), allgather inside the host.
// Each host's uplink then carries 2(H-1)/H of the message, the least any
// allreduce can (a flat ring over H x L ranks sends up to L times that
// through some hosts' links when the ring order crosses them often).
//
// Every slice's result is computed once, by the cross-host allreduce, and
// copied everywhere, so every rank gets the same bits; they equal the flat
// path's within float rounding (the order of the additions differs).
#ifndef DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_
#define DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "process_group/options.h"
#include "process_group/tensor.h"

namespace ddpx {

class GlooBackend;

class TwoLevelAllreduce {
 public:
  // `local`: this host's ranks; `cross`: the ranks with this rank's local
  // rank, one per host. Both used by this object only (one op at a time).
  TwoLevelAllreduce(std::shared_ptr<GlooBackend> local, std::shared_ptr<GlooBackend> cross);
  ~TwoLevelAllreduce();

  // Allreduces `t` (contiguous, on the CPU) in place. AVG reduces as SUM:
  // the caller divides by the world size.
  absl::Status run(const Tensor& t, ReduceOp op, std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<GlooBackend> local_;
  std::shared_ptr<GlooBackend> cross_;
  Tensor scratch_;  // grown to the largest message
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_
