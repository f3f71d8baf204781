// Where each collective's path is chosen: the rows (which paths a group
// has, in order of choice) in the constructor, the limits of each path in
// takes(). docs/gloo.md has the table with the measurements behind it.
#include "process_group/gloo/execution_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "process_group/gloo/reduce_scatter_ring.h"
#include "process_group/gloo/sync_collectives.h"

namespace ddpx {

const char* path_name(Path path) {
  switch (path) {
    case Path::kTwoLevel: return "two_level";
    case Path::kSharedMemory: return "shared_memory";
    case Path::kSyncPairs: return "sync_pairs";
    case Path::kEventLoop: return "event_loop";
  }
  return "unknown";
}

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown";
}

ExecutionPlan::ExecutionPlan(const GroupPaths& group)
    : group_(group), sync_piece_bytes_(ddpx::sync_piece_bytes(group.size, group.sync_limits)) {
  const bool shm = group.shared_memory;
  // The sync pairs carry a classic class only where the ranks agreed on a
  // send capacity (none on one rank); the barrier needs a peer.
  const bool sync = group.sync_pairs;
  auto row = [this](Collective op) -> std::vector<Path>& { return rows_[static_cast<int>(op)]; };
  // Shared memory takes every size of the ops it has, so nothing follows it.
  // Two-level and shared memory never meet: one needs several hosts, the
  // other one.
  if (group.two_level) row(Collective::kAllreduce).push_back(Path::kTwoLevel);
  for (Collective op : {Collective::kAllreduce, Collective::kBroadcast, Collective::kReduce,
                        Collective::kAllgather, Collective::kReduceScatter,
                        Collective::kAlltoall, Collective::kBarrier}) {
    if (shm) row(op).push_back(Path::kSharedMemory);
  }
  for (Collective op : {Collective::kAllreduce, Collective::kBroadcast, Collective::kAllgather,
                        Collective::kReduceScatter, Collective::kGather, Collective::kScatter,
                        Collective::kBarrier}) {
    if (!sync || (shm && op != Collective::kGather && op != Collective::kScatter)) continue;
    if (op == Collective::kBarrier && group.size <= 1) continue;
    row(op).push_back(Path::kSyncPairs);
  }
  for (auto& paths : rows_) {
    if (paths.empty() || paths.back() != Path::kSharedMemory) paths.push_back(Path::kEventLoop);
  }
}

bool ExecutionPlan::takes(Collective op, Path path, size_t nbytes) const {
  const SyncPairLimits& limits = group_.sync_limits;
  switch (path) {
    case Path::kTwoLevel:
      return nbytes >= group_.two_level_min_bytes;
    case Path::kSharedMemory:
    case Path::kEventLoop:
      return true;
    case Path::kSyncPairs:
      break;
  }
  switch (op) {
    case Collective::kAllreduce:
      return tcp_allreduce(nbytes).where != AllreducePlan::Where::kEventLoop;
    case Collective::kBroadcast:
      return nbytes > 0 && broadcast_runs_on_sync_pairs(nbytes, limits);
    case Collective::kAllgather:
      return allgather_runs_on_sync_pairs(nbytes, group_.size, limits);
    case Collective::kReduceScatter: {
      // Gloo's classic halving-doubling where it fits as an allreduce of the
      // whole input would (its messages are that allreduce's first half),
      // up to where the ring wins (reduce_scatter_ring.h).
      const size_t total = nbytes * static_cast<size_t>(group_.size);
      return group_.size > 1 && total <= kReduceScatterClassicUpToBytes &&
             allreduce_runs_on_sync_pairs(AllreduceAlgorithm::kHalvingDoubling, total,
                                          group_.size, limits);
    }
    case Collective::kGather:
    case Collective::kScatter:
      return rooted_op_runs_on_sync_pairs(nbytes, limits);
    case Collective::kBarrier:
      return true;
    case Collective::kReduce:
    case Collective::kAlltoall:
      return false;  // not on the sync pairs: Gloo has no classic class for them
  }
  return false;
}

Path ExecutionPlan::choose(Collective op, size_t nbytes) const {
  for (Path path : row(op)) {
    if (takes(op, path, nbytes)) return path;
  }
  return Path::kEventLoop;  // unreachable: every row ends with a path that takes all
}

bool ExecutionPlan::allreduce_may_begin_here(size_t ntensors) const {
  return group_.shared_memory && ntensors == 1;
}

AllreducePlan ExecutionPlan::tcp_allreduce(size_t nbytes) const {
  // The classic classes wait as long as their pairs allow, so they run on
  // the sync pairs only, whose sockets get each op's timeout; the event-loop
  // pairs run Gloo's unbound-buffer algorithms, which take it per call.
  const int size = group_.size;
  const bool has_sync = group_.sync_pairs;
  AllreduceAlgorithm algorithm = group_.allreduce_algorithm.value_or(
      choose_allreduce_algorithm(nbytes, size, has_sync, sync_piece_bytes_));
  if (!allreduce_algorithm_supports(algorithm, size, nbytes)) {
    algorithm = AllreduceAlgorithm::kGlooRing;
  }
  using Where = AllreducePlan::Where;
  if (has_sync && allreduce_runs_on_sync_pairs(algorithm, nbytes, size, group_.sync_limits)) {
    return {algorithm, Where::kSyncPairs};
  }
  if (has_sync && sync_piece_bytes_ > 0 && algorithm == AllreduceAlgorithm::kHalvingDoubling) {
    return {algorithm, Where::kSyncPieces};
  }
  if (is_classic_allreduce(algorithm)) algorithm = AllreduceAlgorithm::kGlooRing;
  return {algorithm, Where::kEventLoop};
}

std::string ExecutionPlan::str() const {
  std::vector<std::string> lines;
  for (int i = 0; i < kCollectives; ++i) {
    std::vector<std::string> names;
    for (Path p : rows_[i]) names.push_back(path_name(p));
    lines.push_back(absl::StrCat(collective_name(static_cast<Collective>(i)), ": ",
                                 absl::StrJoin(names, ", ")));
  }
  return absl::StrJoin(lines, "; ");
}

}  // namespace ddpx
