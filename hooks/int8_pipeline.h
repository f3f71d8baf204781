// The int8 hook's exchange (int8_hook.h) on CPU buckets, pipelined over
// pieces of the bucket (piece_lengths). Per piece: in hierarchical mode a
// float32 reduce-scatter inside the host first; then ByteGrad (bytegrad.h)
// of this rank's slice among the cross-host group (in flat mode: the whole
// piece among the whole group); in hierarchical mode the averaged slice's
// int8 records allgathered inside the host last (a quarter of the float32
// slice's bytes), every rank decoding all of them into its bucket. While
// one piece's int8 records are on the wire, the next piece is
// reduce-scattered and quantized and the previous one decoded: the link
// waits only for the first piece's local steps and the last one's, which
// the short pieces at both ends keep short.
//
// One thread per pipeline runs the buckets in the order they were
// submitted and issues every collective itself in one fixed schedule (all
// reduce-scatters; then for piece i: alltoall i, allgather i-1 across,
// allgather i-2 inside the host), so each group sees the same ops in the
// same order on every rank.
#ifndef DDPX_HOOKS_INT8_PIPELINE_H_
#define DDPX_HOOKS_INT8_PIPELINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "hooks/hook_stats.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {

class Int8Pipeline {
 public:
  // Bucket bytes per piece in the middle: a piece's records (a quarter of
  // its bytes) then take ~8 ms at 1 Gbit/s, against the fixed cost of its
  // collectives.
  static constexpr int64_t kPieceBytes = 4 << 20;
  // The first and the last piece's bytes, where the bucket is large enough:
  // the link idles while the first is reduce-scattered and quantized and
  // while the last is gathered and decoded. (Measured on 3 virtual hosts x 2
  // ranks under other load, 8 MiB in the middle with ends of 1, 2 or 4 MiB
  // did not do better.)
  static constexpr int64_t kEndPieceBytes = 1 << 20;

  // Elements per piece for a bucket of `numel` float32 elements split among
  // `local_size` ranks per host: equal pieces of at most kPieceBytes in the
  // middle and, where the bucket is large enough, pieces doubling from
  // kEndPieceBytes towards the middle at both ends (the link waits for the
  // first piece's local steps and after the last one's, so those should be
  // short). Every piece but the last is a multiple of `local_size`; the
  // lengths sum to `numel`.
  static std::vector<int64_t> piece_lengths(int64_t numel, int64_t local_size);

  // Hierarchical: `local` is this rank's host and `cross` the ranks with
  // this rank's local rank, one per host. Flat: `local` null and `cross` the
  // whole group. `counter` gets the traffic and outlives the pipeline.
  Int8Pipeline(std::shared_ptr<ProcessGroup> local,
                           std::shared_ptr<ProcessGroup> cross, HookStatsCounter* counter);
  // Fails the buckets not yet started, finishes the running one.
  ~Int8Pipeline();
  Int8Pipeline(const Int8Pipeline&) = delete;
  Int8Pipeline& operator=(const Int8Pipeline&) = delete;

  // Averages `data` (flat float32 on the CPU) over every rank of the
  // group(s); the future completes with `data` overwritten.
  std::shared_ptr<Future<Tensor>> submit(Tensor data);

 private:
  // What the thread still reads after completing a bucket's future, whose
  // callbacks may destroy this pipeline (then the thread is detached and
  // finds `stopping` set).
  struct Queue {
    std::mutex mu;
    std::condition_variable wake;
    std::deque<std::pair<Tensor, std::shared_ptr<Future<Tensor>>>> jobs;
    bool stopping = false;
  };
  void loop(const std::shared_ptr<Queue>& queue);
  absl::Status average(const Tensor& data);

  std::shared_ptr<ProcessGroup> local_;
  std::shared_ptr<ProcessGroup> cross_;
  HookStatsCounter* counter_;
  Tensor scratch_;  // PieceLayout::place's: own slices and the padded last piece, grown as needed

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::thread thread_;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_INT8_PIPELINE_H_
