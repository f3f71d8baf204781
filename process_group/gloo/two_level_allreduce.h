// Allreduce across hosts in two levels, for a group that spans several hosts
// with several ranks each (the same number on every host): reduce-scatter
// inside the host (shared memory), allreduce of each slice among the ranks
// with the same local rank across hosts (so every local rank carries 1/L of
// the data over the host's uplink, all at once), allgather inside the host.
// Each host's uplink then carries 2(H-1)/H of the message, the least any
// allreduce can (a flat ring over H x L ranks sends up to L times that
// through some hosts' links when the ring order crosses them often).
//
// The message goes in pieces of kPieceBytes, pipelined: while one piece
// crosses the uplink, the next is reduce-scattered and the previous
// allgathered inside the host, so the link waits only for the first
// piece's reduce-scatter and the last one's allgather.
//
// Every slice's result is computed once, by the cross-host allreduce, and
// copied everywhere, so every rank gets the same bits; they equal the flat
// path's within float rounding (the order of the additions differs).
#ifndef DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_
#define DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/options.h"
#include "core/tensor.h"

namespace ddpx {

class GlooBackend;

class TwoLevelAllreduce {
 public:
  // `local`: this host's ranks; `cross`: the ranks with this rank's local
  // rank, one per host. Both used by this object only (one op at a time).
  TwoLevelAllreduce(std::shared_ptr<GlooBackend> local, std::shared_ptr<GlooBackend> cross);
  ~TwoLevelAllreduce();

  // Bytes of the message per pipelined piece: large enough that a piece's
  // cross-host ring is bandwidth-bound at 1 Gbit/s, small enough that the
  // local steps before the first and after the last piece are short.
  static constexpr int64_t kPieceBytes = 4 << 20;

  // Allreduces `t` (contiguous, on the CPU) in place. AVG reduces as SUM:
  // the caller divides by the world size.
  absl::Status run(const Tensor& t, ReduceOp op, std::chrono::milliseconds timeout);
  // Aborts both levels' groups (GlooBackend::abort).
  void abort(const absl::Status& why);

 private:
  std::shared_ptr<GlooBackend> local_;
  std::shared_ptr<GlooBackend> cross_;
  Tensor scratch_;  // grown to the largest message
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_TWO_LEVEL_ALLREDUCE_H_
