// Collectives over one shared-memory channel (channel.h). Messages of any
// size stream through the fixed staging slots chunk by chunk; consecutive
// chunks use different slots, so a rank copies its next chunk in while its
// peers still reduce or copy out the previous one.
//
// Reductions have a fixed order per element, the same on every rank, so
// every rank gets the same bits:
//  - allreduce up to small_max_bytes: every rank copies its input into its
//    slot (up to kBoxBytes: its inline box, layout.h), then reduces all
//    ranks' copies in rank order 0, 1, ..., n-1.
//  - larger allreduce and reduce: the chunk is split in n parts; rank j
//    reduces part j starting from its own data, then ranks j+1, ..., j-1
//    (mod n), into its slot, and every rank copies every part out. With
//    three slots or more the chunks go through a pipeline of one step
//    each (a rank's step k+1 says it reduced its part of chunk k-1 and
//    copied chunk k+1 in): C+1 hand-offs between ranks for C chunks
//    instead of 3C, and a hand-off is where a rank on a loaded host waits
//    for its peer to get a CPU back.
//  - reduce_scatter: rank j reduces its part in rank order 0..n-1.
// Every op posts the same number of steps on every rank (channel.h).
#ifndef DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_
#define DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_

#include <chrono>
#include <cstddef>

#include "absl/status/status.h"
#include "process_group/shm/channel.h"

namespace ddpx {
namespace shm {

// out[i] = a[i] op b[i]; out may be a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

struct Reduction {
  ReduceFn fn;
  size_t element_bytes;
  // Identifies the dtype and reduce op across processes (fn's address does
  // not), for the ranks' comparison of their ops; 0: unknown.
  uint8_t code = 0;
};

// Allreduces take the one-pass path up to this size: below it one step
// less beats the split reduction's parallel work (measured on 2 ranks, 8 KiB
// 2.5 us one-pass; 32 KiB 5.8 us one-pass, 4.8 us split).
inline constexpr size_t kDefaultSmallMaxBytes = 8 << 10;

// Allreduces and reduces of at least this many bytes write their output
// with streaming stores: each rank's output alone is then half the last-level
// cache of a typical server core complex, and would not stay in it anyway.
inline constexpr size_t kStreamingCopyFromBytes = 16 << 20;

// An allreduce of no elements does nothing, not even begin an op on the
// channel (Channel::begin_op), as the backend's worker path skips it.
absl::Status allreduce(Channel& ch, void* data, size_t count, Reduction r,
                       const Deadline& deadline, size_t small_max_bytes = kDefaultSmallMaxBytes);

// The one-pass allreduce (up to small_max_bytes) in two halves, for a
// caller that must not wait for peers that have not issued their op yet:
// begin() copies this rank's data in and posts its step, waiting at most for
// peers to finish ops they are already in (a slot's earlier use);
// finish() waits for every peer's data and reduces. allreduce() is begin()
// then finish().
class SmallAllreduce {
 public:
  SmallAllreduce(Channel& ch, void* data, size_t count, Reduction r)
      : ch_(ch), data_(data), count_(count), r_(r), in_box_(count * r.element_bytes <= kBoxBytes) {}
  static bool fits(const Channel& ch, size_t count, Reduction r,
                   size_t small_max_bytes = kDefaultSmallMaxBytes);

  absl::Status begin(const Deadline& deadline);
  // Whether every peer has posted its data, spinning up to `spin` for it:
  // finish() then does not wait. Through the inline boxes, reads `clock`
  // as Channel::poll_boxes does (*seen_at stays 0 otherwise).
  bool peers_ready(std::chrono::nanoseconds spin, Channel::PollClock clock = nullptr,
                   int64_t* seen_at = nullptr);
  absl::Status finish(const Deadline& deadline);

 private:
  Channel& ch_;
  void* const data_;
  const size_t count_;
  absl::Status finish_from_boxes(const Deadline& deadline);

  const Reduction r_;
  // Through the channel's inline boxes (up to kBoxBytes); then slot_ is the box.
  const bool in_box_;
  int slot_ = 0;
  uint32_t copied_ = 0;
  bool done_ = false;  // nothing (left) to do: one rank, no elements, finished
};
// Only `root`'s data changes.
absl::Status reduce(Channel& ch, void* data, size_t count, Reduction r, int root,
                    const Deadline& deadline);
absl::Status broadcast(Channel& ch, void* data, size_t nbytes, int root,
                       const Deadline& deadline);
// `out` gets rank r's `nbytes` at r * nbytes.
absl::Status allgather(Channel& ch, const void* in, void* out, size_t nbytes,
                       const Deadline& deadline);
// `in` holds size() blocks of `count` elements; `out` gets the reduction of
// every rank's block rank().
absl::Status reduce_scatter(Channel& ch, const void* in, void* out, size_t count, Reduction r,
                            const Deadline& deadline);
absl::Status barrier(Channel& ch, const Deadline& deadline);

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_
