// The Gloo backend's execution plan: for each collective, the path it takes
// in this group, in the manner of Open MPI's coll framework (per
// communicator, a table of the module that runs each collective, chosen once
// when the communicator forms, each with its fallback).
//
// A group has up to four paths, each in its own file:
//   two-level        TwoLevelAllreduce (two_level_allreduce.h): several hosts
//                    with several ranks each, large allreduces only
//   shared memory    SharedMemoryPath (shared_memory_path.h): every rank on
//                    one host
//   sync pairs       SyncPairsPath (sync_pairs_path.h): Gloo's classic
//                    classes on pairs read by the op's thread, small ops
//   event loop       EventLoopPath (event_loop_path.h): Gloo's unbound-buffer
//                    collectives; takes every op, the fallback of all
//
// When the group forms (GlooBackend::connect), the plan keeps for each
// collective the paths this group has, in order of choice: its row. An op
// takes the first path of its row that takes its size (`takes` in
// execution_plan.cc); the event loop takes every size, so every row ends
// there. The choice depends only on sizes, the options and what the ranks
// agreed at rendezvous, never on the op's timeout, so every rank picks the
// same path. CollectiveRunner (collective_runner.h) runs the chosen path
// with the steps every path shares around it.
//
// Contract with the front end: the plan and the paths trust their input.
// Tensors, dtypes, element counts, ranks and reduce ops were checked once,
// on the way down, by process_group/front_end/validate.h (core/backend.h);
// a reduce op reaches a path only on a dtype it is defined for.
#ifndef DDPX_PROCESS_GROUP_GLOO_EXECUTION_PLAN_H_
#define DDPX_PROCESS_GROUP_GLOO_EXECUTION_PLAN_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "process_group/gloo/allreduce_algorithms.h"
#include "process_group/gloo/sync_pairs.h"

namespace ddpx {

enum class Path : uint8_t { kTwoLevel, kSharedMemory, kSyncPairs, kEventLoop };
// "two_level", "shared_memory", "sync_pairs", "event_loop".
const char* path_name(Path path);

// The collectives the plan routes. allreduce_coalesced is an allreduce of
// one flat tensor, allgather_into_tensor an allgather, reduce_scatter_tensor
// a reduce_scatter and alltoall_base an alltoall; point-to-point ops and
// monitored_barrier have paths of their own (gloo_p2p.cc).
enum class Collective : uint8_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kGather,
  kScatter,
  kAlltoall,
  kBarrier,
};
inline constexpr int kCollectives = 9;
const char* collective_name(Collective op);

// The algorithm an allreduce over TCP runs, and where: on the sync pairs in
// one piece or in pieces, or on the event-loop pairs.
struct AllreducePlan {
  enum class Where { kSyncPairs, kSyncPieces, kEventLoop };
  AllreduceAlgorithm algorithm;
  Where where;
};

// What a group has, known when its rendezvous is done.
struct GroupPaths {
  int size = 1;
  bool two_level = false;         // TwoLevelAllreduce per worker
  size_t two_level_min_bytes = 0;  // GlooOptions::two_level_min_bytes
  bool shared_memory = false;     // a shared-memory channel per worker
  bool sync_pairs = false;        // a sync context per worker
  SyncPairLimits sync_limits;     // agreed by all ranks (zeros without)
  // GlooOptions::allreduce_algorithm: the TCP allreduce's, where forced.
  std::optional<AllreduceAlgorithm> allreduce_algorithm;
};

class ExecutionPlan {
 public:
  explicit ExecutionPlan(const GroupPaths& group);

  // The path of one op of `op`; `nbytes` is what the path's limits count:
  // bytes per tensor (allreduce, broadcast, reduce), per rank (allgather,
  // gather, scatter), of each rank's output (reduce_scatter); unused for
  // alltoall and barrier.
  Path choose(Collective op, size_t nbytes) const;
  // Whether an allreduce of `ntensors` tensors of `nbytes` each may begin on
  // the issuing thread (allreduce_here.cc): a single tensor on the shared-
  // memory path, where the channel's small-message protocol fits it.
  bool allreduce_may_begin_here(size_t ntensors) const;
  // An allreduce on the sync pairs or the event loop: which algorithm, where.
  AllreducePlan tcp_allreduce(size_t nbytes) const;

  // This group's paths for `op`, in order of choice (the last one takes
  // every size).
  const std::vector<Path>& row(Collective op) const { return rows_[static_cast<int>(op)]; }
  // The whole table: "allreduce: shared_memory; broadcast: shared_memory; ...".
  std::string str() const;

  const GroupPaths& group() const { return group_; }
  // The piece size of large halving-doubling allreduces on the sync pairs,
  // 0 when they do not take pieces (the same on every rank).
  size_t sync_piece_bytes() const { return sync_piece_bytes_; }

 private:
  // Whether `path` takes an op of `op` of `nbytes` (see choose()).
  bool takes(Collective op, Path path, size_t nbytes) const;

  GroupPaths group_;
  size_t sync_piece_bytes_ = 0;
  std::array<std::vector<Path>, kCollectives> rows_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_EXECUTION_PLAN_H_
