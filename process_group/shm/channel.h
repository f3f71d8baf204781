// The synchronization protocol of one shared-memory channel: every rank of
// the group owns a step counter in its own segment and a set of staging
// slots, and reads (never writes) its peers'.
//
// Every rank runs the same ops on a channel in the same order (the channel
// belongs to one backend worker, which runs its ops one at a time in
// sequence order), and each op posts the same number of steps on every
// rank. So a rank that has posted its n-th step waits for "peer p has
// posted its n-th step" by comparing p's counter with its own: no message
// is ever exchanged, only counters compared.
//
// A slot is written only by its owner, and only once every peer has posted
// the step that ends its last read of it (acquire_slot); a peer reads a slot
// only after the owner posted the step that ends the write. Counters only
// grow and each has a single writer, so no value can tear, and no wait can
// be for a step its owner will not reach unless that owner stops (dies,
// hangs, or runs a different op): those waits end at the op's deadline, or
// sooner when the owner's process is gone (peer_liveness.h) or it gave up
// on the channel itself (ChannelControl::abandoned), so a failure spreads to
// every rank at once and each names the rank it was waiting for.
#ifndef DDPX_PROCESS_GROUP_SHM_CHANNEL_H_
#define DDPX_PROCESS_GROUP_SHM_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "process_group/shm/abort_signal.h"
#include "process_group/shm/layout.h"
#include "process_group/shm/peer_liveness.h"

namespace ddpx {
namespace shm {

// When an op gives up, and how to say so.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `timeout` from now.
  static Deadline after(std::chrono::milliseconds timeout) {
    return Deadline(timeout, Clock::now() + timeout);
  }
  // At `at`, the end of a `timeout` that began earlier.
  static Deadline until(Clock::time_point at, std::chrono::milliseconds timeout) {
    return Deadline(timeout, at);
  }
  // `timeout` from when the op first waits longer than its spin: a small op
  // mostly finishes without that wait, and then without a clock read for a
  // deadline it never needed (on the critical path of an 8 B op, which is
  // well under a microsecond). The op gives up at most its spin later than
  // `timeout` after its first wait began.
  static Deadline from_first_wait(std::chrono::milliseconds timeout) {
    return Deadline(timeout, Clock::time_point::max());
  }

  std::chrono::milliseconds timeout() const { return timeout_; }
  // When the op gives up; a deadline from_first_wait() is set here, by the
  // first wait that asks, from `waiting_since` (when that wait began).
  // Used by the thread running the op only.
  Clock::time_point at(Clock::time_point waiting_since) const {
    if (at_ == Clock::time_point::max()) at_ = waiting_since + timeout_;
    return at_;
  }

 private:
  Deadline(std::chrono::milliseconds timeout, Clock::time_point at) : timeout_(timeout), at_(at) {}

  std::chrono::milliseconds timeout_;
  mutable Clock::time_point at_;
};

// How long a waiter spins, then yields, before it sleeps on the futex.
// With more ranks than cores a spinning waiter takes the core the peer it
// waits for needs, so it spins briefly and yields at once. A yield that
// kept the waiter off its CPU for `contended_yield` or more means other
// threads (of any process: virtual hosts share the CPUs) wanted that CPU:
// further yields would only take time from them, so the waiter sleeps.
struct WaitPolicy {
  std::chrono::nanoseconds spin{5'000};
  std::chrono::nanoseconds yield{1'000'000};
  std::chrono::nanoseconds contended_yield{20'000};
  // How long the thread that issues a small allreduce (SmallAllreduce's
  // caller that must not wait for peers that have not issued theirs) yields
  // for its peers' data after its spin, before it hands the op's rest to a
  // worker. Only with more ranks than CPUs: there the peers that have not
  // posted often wait for this very CPU, and the hand-off would only add a
  // thread to wake (as Open MPI polls and yields between polls when
  // oversubscribed, its mpi_yield_when_idle).
  std::chrono::nanoseconds issue_yield{0};
  // Whether a waiter that keeps finding its peer on its own CPU moves itself
  // off it (cpu_sharing.h): only where the host has a CPU for every rank.
  bool move_off_shared_cpu = true;
  // Waits in a row that found the peer on this CPU before the move.
  int shared_cpu_waits_before_move = 8;
  // The policy for `local_ranks` ranks on a host whose process may run on
  // `cpus` CPUs.
  static WaitPolicy for_load(int local_ranks, int cpus);
};

// What one op is, as ranks compare it on a channel (Channel::begin_op).
struct OpDescription {
  enum Kind : uint8_t {
    kAllreduce = 1, kReduce, kBroadcast, kAllgather, kReduceScatter, kBarrier, kAlltoall
  };
  Kind kind = kBarrier;
  uint64_t nbytes = 0;  // per rank (0 for alltoall, whose ranks' sizes differ)
  int root = -1;        // reduce, broadcast
  uint8_t reduction = 0;  // Reduction::code (dtype and reduce op), 0 if none
  // "broadcast of 64 B from root 1".
  std::string str() const;
};

class Channel {
 public:
  // controls[r] and slots[r][s] point into rank r's mapped segment;
  // peers[r] tells "exited" from "slow" while this rank waits for r (null:
  // not watched), and outlives the channel, as does `abort` (null: none).
  Channel(int rank, int size, std::vector<ChannelControl*> controls,
          std::vector<std::vector<uint8_t*>> slots, size_t slot_bytes,
          std::vector<const PeerLiveness*> peers, WaitPolicy policy,
          const AbortSignal* abort = nullptr);

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Ok, or the failure that left this channel out of step with its peers
  // (every later op fails with it).
  absl::Status health() const;

  // Starts an op on this channel (every collective calls it first, on every
  // rank). The first wait on each peer within the op compares the peer's
  // description of its op with this one; a difference fails the op (and
  // the channel) naming the peer and both ops.
  void begin_op(const OpDescription& op);

  // Picks the slot of the next chunk. When this rank will write it, first
  // waits until every peer finished reading it.
  absl::Status acquire_slot(bool will_write, const Deadline& deadline, int* slot);
  // The chunk in `slot` is done once every rank has posted `step`.
  void release_slot(int slot, uint32_t step) { slot_free_after_[slot] = step; }
  int num_slots() const { return static_cast<int>(slot_free_after_.size()); }
  // How long a waiter spins before it yields (WaitPolicy).
  std::chrono::nanoseconds spin() const { return policy_.spin; }
  // How long an issuing thread yields for its peers after that (WaitPolicy).
  std::chrono::nanoseconds issue_yield() const { return policy_.issue_yield; }
  uint8_t* slot(int owner, int slot) const { return slots_[owner][slot]; }
  // Takes the first `nbytes` of the slot the next chunk will use for
  // writing (PREFETCHW), so that the next op's copy-in does not wait for
  // the peers to give up lines they read long ago. Only a hint: a peer
  // still reading them gets them back.
  void prepare_next_slot(size_t nbytes) const;

  // Completes this rank's next step and wakes peers asleep on it; returns
  // the step's number.
  uint32_t post();
  // Waits until `peer` has posted `step` (and, the first time in an op for a
  // step of this op, that it runs the same op).
  absl::Status wait_for(int peer, uint32_t step, const Deadline& deadline);
  // Waits until every peer has posted `step`.
  absl::Status wait_all(uint32_t step, const Deadline& deadline);
  // Whether every peer has posted `step`, spinning up to `spin` for it (not
  // at all while a peer it waits for was last seen on this rank's CPU).
  // Compares no op stamps: wait_all() after it does.
  bool poll_all(uint32_t step, std::chrono::nanoseconds spin);

  // Inline boxes (layout.h), for an allreduce of up to kBoxBytes: its data
  // travels in the lines a peer polls. Writes this rank's `nbytes` into its
  // next box, after every peer finished reading what that box held last,
  // and posts the step that publishes them; *box gets the box, *step the step.
  absl::Status publish_box(const void* data, size_t nbytes, const Deadline& deadline, int* box,
                           uint32_t* step);
  // Whether every peer's `box` holds its data of `step`, spinning up to
  // `spin` for it (as poll_all() does). With a `clock`, reads it before
  // each look and leaves in *seen_at the reading before the look that
  // found the data (a caller that records when its op completed gets that
  // moment from the wait it makes anyway, without a read after it).
  using PollClock = int64_t (*)();
  bool poll_boxes(int box, uint32_t step, std::chrono::nanoseconds spin,
                  PollClock clock = nullptr, int64_t* seen_at = nullptr);
  // Waits until every peer's `box` holds its data of `step` for this op (a
  // peer that runs another op fails it, as wait_for() does).
  absl::Status wait_boxes(int box, uint32_t step, size_t nbytes, const Deadline& deadline);
  // Once every peer's `box` of this op was seen (wait_boxes), each peer has
  // read this rank's other box for the last time until this rank rewrites
  // it in its next box op: takes the lines `nbytes` would fill for writing
  // (PREFETCHW), so that the next op's stores find them here instead of
  // waiting for the peers to give them up. After the op's reads of the
  // peers' boxes, whose line requests it would otherwise queue behind.
  void prepare_next_box(int box, size_t nbytes) const;
  // `owner`'s `nbytes` in `box` (waited for), to be read in place until
  // this rank posts its next step.
  const void* box_data(int owner, int box, size_t nbytes) const {
    return controls_[owner]->boxes[box].run(nbytes);
  }
  // The box is free once every rank has posted `step`.
  void release_box(int box, uint32_t step) { box_free_after_[box] = step; }

 private:
  // Whether `peer` has done its part of `step`: posted it, or (seen in its
  // box) done everything that comes before posting it.
  bool reached(int peer, uint32_t step);
  // Whether `peer`'s `box` holds its data of `step` (its seal says so).
  bool box_ready(int peer, int box, uint32_t step);
  // The tag of the current op in a box's seal: its number and size (an
  // allreduce of this channel's reduction), so ranks compare ops there.
  uint32_t box_tag(size_t nbytes) const;
  // Whether ready(peer) holds for every peer, spinning up to `spin` for it
  // (not at all while a peer it waits for was last seen on this CPU).
  template <typename Ready>
  bool poll_peers(std::chrono::nanoseconds spin, Ready ready);
  // Whether `peer` began its latest op on the CPU this rank began its own on.
  bool peer_on_this_cpu(int peer) const;
  absl::Status wait_for_step(int peer, uint32_t step, const Deadline& deadline);
  // Compares `peer`'s stamp for the current op with this rank's.
  absl::Status check_same_op(int peer, const Deadline& deadline);
  // Keeps `status` as this channel's failure and tells the peers (their
  // waits on this rank end at once), naming `culprit`, the rank this one
  // waited for.
  absl::Status fail(absl::Status status, int culprit);
  // When `peer` gave up on the channel, fails this rank's too (naming the
  // rank that peer waited for) and returns the error; else ok.
  absl::Status give_up_if_abandoned(int peer, uint32_t step, const Deadline& deadline);

  const int rank_;
  const int size_;
  const std::vector<ChannelControl*> controls_;
  const std::vector<std::vector<uint8_t*>> slots_;
  const size_t slot_bytes_;
  const std::vector<const PeerLiveness*> peers_;
  const WaitPolicy policy_;
  const AbortSignal* const abort_;

  uint32_t steps_ = 0;  // this rank's counter (its own copy)
  uint32_t ops_ = 0;    // ops begun on this channel
  uint32_t op_first_step_ = 0;  // steps_ when the current op began
  uint64_t op_stamp_ = 0;       // the current op's stamp
  std::vector<uint32_t> checked_;  // per peer: the op whose stamp was compared
  uint64_t chunks_ = 0;
  int cpu_ = -1;  // where this rank began its current op
  int published_cpu_ = -1;  // what its CpuLine says
  int shared_cpu_waits_ = 0;  // waits in a row that found the peer on cpu_
  std::vector<uint32_t> slot_free_after_;
  // Per peer: the latest step it has been seen to reach (reached()), so
  // that a wait for a step seen earlier reads no line the peer writes.
  std::vector<uint32_t> seen_;
  // Whether post() leaves its fence to the sleepers (asymmetric_fence.h).
  const bool light_posts_;
  uint64_t boxes_used_ = 0;
  uint32_t box_free_after_[2] = {0, 0};
  absl::Status broken_;
};

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_CHANNEL_H_
