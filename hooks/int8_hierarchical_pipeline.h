// The hierarchical int8 hook's exchange (int8_hook.h), pipelined over
// pieces of the bucket: inside the host a float32 reduce-scatter, then
// ByteGrad (bytegrad.h) of this rank's slice among the ranks of the same
// local rank on the other hosts, then an allgather inside the host. Piece
// by piece, so that while one piece's int8 records cross the uplink the
// next piece is reduce-scattered and quantized and the previous one decoded
// and allgathered: the link waits for the first piece's local steps and
// the last piece's only.
//
// One thread per pipeline runs the buckets in the order they were
// submitted, and issues every collective itself in a fixed schedule (all
// reduce-scatters; then for piece i: alltoall i, allgather i-1 across
// hosts, allgather i-2 inside the host), so both subgroups see the same
// ops in the same order on every rank.
#ifndef DDPX_HOOKS_INT8_HIERARCHICAL_PIPELINE_H_
#define DDPX_HOOKS_INT8_HIERARCHICAL_PIPELINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "hooks/hook_stats.h"
#include "process_group/future.h"
#include "process_group/process_group.h"

namespace ddpx {

class HierarchicalInt8Pipeline {
 public:
  // Bucket bytes per piece: a piece's records (a quarter of its bytes) then
  // take ~8 ms at 1 Gbit/s, against the fixed cost of its collectives.
  static constexpr int64_t kPieceBytes = 4 << 20;

  // `local`: this rank's host; `cross`: the ranks with this rank's local
  // rank, one per host. `counter` gets the traffic and outlives the
  // pipeline.
  HierarchicalInt8Pipeline(std::shared_ptr<ProcessGroup> local,
                           std::shared_ptr<ProcessGroup> cross, HookStatsCounter* counter);
  // Fails the buckets not yet started, finishes the running one.
  ~HierarchicalInt8Pipeline();
  HierarchicalInt8Pipeline(const HierarchicalInt8Pipeline&) = delete;
  HierarchicalInt8Pipeline& operator=(const HierarchicalInt8Pipeline&) = delete;

  // Averages `data` (flat float32 on the CPU) over every rank of both
  // levels; the future completes with `data` overwritten.
  std::shared_ptr<Future<Tensor>> submit(Tensor data);

 private:
  void loop();
  absl::Status average(const Tensor& data);

  std::shared_ptr<ProcessGroup> local_;
  std::shared_ptr<ProcessGroup> cross_;
  HookStatsCounter* counter_;
  Tensor slices_;  // every piece's own slice (and the padded last piece), grown as needed

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<Tensor, std::shared_ptr<Future<Tensor>>>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_INT8_HIERARCHICAL_PIPELINE_H_
