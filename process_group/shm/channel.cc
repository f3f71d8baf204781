#include "process_group/shm/channel.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/culprits.h"
#include "process_group/shm/asymmetric_fence.h"
#include "process_group/shm/cpu_sharing.h"

namespace ddpx {
namespace shm {
namespace {

using Clock = std::chrono::steady_clock;

// How long one futex sleep lasts at most: the deadline and the peer's
// liveness are checked between sleeps.
constexpr std::chrono::milliseconds kSleepSlice{20};
constexpr std::chrono::microseconds kUnfencedSleepSlice{200};

// Futexes on MAP_SHARED memory must not use FUTEX_PRIVATE_FLAG: the waiter
// and the waker are different processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds for_at_most) {
  timespec ts{static_cast<time_t>(for_at_most.count() / 1'000'000'000),
              static_cast<long>(for_at_most.count() % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// A stamp: which op (12 bits of the op's number on the channel), then what
// it is, in one word so that a peer never reads half of one.
constexpr int kIndexShift = 52, kKindShift = 49, kRootShift = 41, kCodeShift = 34;
constexpr uint64_t kMaxStampBytes = (uint64_t{1} << kCodeShift) - 1;

uint64_t stamp_of(uint32_t index, const OpDescription& op) {
  const uint64_t root = std::min<uint64_t>(static_cast<uint64_t>(op.root + 1), 255);
  return (uint64_t{index & 0xfff} << kIndexShift) | (uint64_t{op.kind & 7u} << kKindShift) |
         (root << kRootShift) | (uint64_t{op.reduction & 0x7fu} << kCodeShift) |
         std::min(op.nbytes, kMaxStampBytes);
}

uint32_t stamp_index(uint64_t stamp) { return static_cast<uint32_t>(stamp >> kIndexShift); }

OpDescription description_of(uint64_t stamp) {
  OpDescription op;
  op.kind = static_cast<OpDescription::Kind>((stamp >> kKindShift) & 7);
  op.root = static_cast<int>((stamp >> kRootShift) & 0xff) - 1;
  op.reduction = static_cast<uint8_t>((stamp >> kCodeShift) & 0x7f);
  op.nbytes = stamp & kMaxStampBytes;
  return op;
}

// A waiter's spin: pauses, with the clock read only every 64th, since most
// waits of a small op end before the first read and a read costs about as
// much as the wait itself. The budget counts from the first read.
class SpinTimer {
 public:
  explicit SpinTimer(std::chrono::nanoseconds budget) : budget_(budget) {}
  // One pause; false once the budget is spent.
  bool pause() {
    if (budget_.count() == 0) return false;  // no spin: one look only
    _mm_pause();
    if ((++spins_ & 63) != 0) return true;
    const Clock::time_point now = Clock::now();
    if (spins_ == 64) {
      start_ = now;
      return true;
    }
    return now - start_ < budget_;
  }
  // When the spin began to be timed; only once pause() said it was spent.
  Clock::time_point start() const { return start_; }

 private:
  const std::chrono::nanoseconds budget_;
  unsigned spins_ = 0;
  Clock::time_point start_;
};

// Spins until ready() holds (true) or the timer's budget is spent (false).
template <typename Ready>
bool spin_until(SpinTimer& timer, Ready ready) {
  while (!ready()) {
    if (!timer.pause()) return false;
  }
  return true;
}

// PREFETCHW: the line in this core's cache, exclusive (a no-op on CPUs
// without it); GCC emits it for __builtin_prefetch only with -mprfchw.
void prefetch_for_write(const void* line) {
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(line)));
}

}  // namespace

std::string OpDescription::str() const {
  const char* names[] = {"?", "allreduce", "reduce", "broadcast", "allgather", "reduce_scatter",
                         "barrier", "alltoall"};
  std::string out = names[kind <= kAlltoall ? kind : 0];
  if (kind != kBarrier && kind != kAlltoall) {
    absl::StrAppend(&out, " of ", nbytes, nbytes == kMaxStampBytes ? "+" : "", " B");
  }
  if (kind == kReduce || kind == kBroadcast) absl::StrAppend(&out, " to/from root ", root);
  if (reduction != 0) absl::StrAppend(&out, " (dtype and reduce op code ", reduction, ")");
  return out;
}

WaitPolicy WaitPolicy::for_load(int local_ranks, int cpus) {
  WaitPolicy p;
  if (local_ranks > cpus) {
    p.spin = std::chrono::microseconds(2);
    p.yield = std::chrono::microseconds(200);
    p.issue_yield = std::chrono::microseconds(50);
    p.move_off_shared_cpu = false;  // some ranks must share a CPU
  }
  return p;
}

Channel::Channel(int rank, int size, std::vector<ChannelControl*> controls,
                 std::vector<std::vector<uint8_t*>> slots, size_t slot_bytes,
                 std::vector<const PeerLiveness*> peers, WaitPolicy policy,
                 const AbortSignal* abort)
    : rank_(rank),
      size_(size),
      controls_(std::move(controls)),
      slots_(std::move(slots)),
      slot_bytes_(slot_bytes),
      peers_(std::move(peers)),
      policy_(policy),
      abort_(abort),
      checked_(static_cast<size_t>(size), 0),
      slot_free_after_(slots_.empty() ? 0 : slots_[0].size(), 0),
      seen_(static_cast<size_t>(size), 0),
      light_posts_(posts_may_skip_fence()) {
  controls_[rank_]->cpu.value.store(-1, std::memory_order_relaxed);
}

absl::Status Channel::health() const { return broken_; }

absl::Status Channel::fail(absl::Status status, int culprit) {
  if (broken_.ok()) {
    broken_ = status;
    ChannelControl* own = controls_[rank_];
    own->abandoned.value.store(culprit < 0 ? kNoCulprit : static_cast<uint32_t>(culprit) + 1,
                               std::memory_order_seq_cst);
    futex_wake_all(&own->signal.value);
  }
  return status;
}

absl::Status Channel::give_up_if_abandoned(int peer, uint32_t step, const Deadline& deadline) {
  const uint32_t word = controls_[peer]->abandoned.value.load(std::memory_order_acquire);
  if (word == 0) return absl::OkStatus();
  // It posted `step` before it gave up (a peer posts, then waits): its part
  // of this step is done, and the op goes on (to compare what it runs).
  if (reached(peer, step)) return absl::OkStatus();
  const bool known = word != kNoCulprit;
  absl::Status s = absl::UnavailableError(absl::StrCat(
      "rank ", peer, " gave up on the shared-memory path",
      known ? absl::StrCat(" while it waited for rank ", word - 1) : "",
      " (timeout ", deadline.timeout().count(), " ms)"));
  set_culprits(&s, {CulpritReason::kGaveUp, {peer}});
  return fail(std::move(s), known ? static_cast<int>(word - 1) : peer);
}

void Channel::begin_op(const OpDescription& op) {
  ++ops_;
  op_first_step_ = steps_;
  op_stamp_ = stamp_of(ops_, op);
  // Before the op's first step (post() stores with seq_cst): a peer that
  // sees that step sees this.
  ChannelControl* own = controls_[rank_];
  own->stamps[ops_ % ChannelControl::kOpStamps].store(op_stamp_, std::memory_order_release);
  own->signal.op_stamp.store(op_stamp_, std::memory_order_release);
  cpu_ = current_cpu();
  if (cpu_ != published_cpu_) {
    own->cpu.value.store(cpu_, std::memory_order_relaxed);
    published_cpu_ = cpu_;
  }
}

absl::Status Channel::check_same_op(int peer, const Deadline& deadline) {
  checked_[peer] = ops_;
  // The peer's latest op, read with its step counter, is usually this one;
  // else its stamp is in the peer's ring.
  uint64_t theirs = controls_[peer]->signal.op_stamp.load(std::memory_order_acquire);
  if (stamp_index(theirs) != stamp_index(op_stamp_)) {
    theirs = controls_[peer]->stamps[ops_ % ChannelControl::kOpStamps].load(
        std::memory_order_acquire);
  }
  // Another op number: the peer's op counts went apart earlier (already
  // reported) or it ran far ahead; nothing to compare.
  if (stamp_index(theirs) != stamp_index(op_stamp_) || theirs == op_stamp_) {
    return absl::OkStatus();
  }
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(
      "rank ", peer, " runs another op on the shared-memory path: ",
      description_of(theirs).str(), " where this rank runs ", description_of(op_stamp_).str(),
      " (op ", ops_, " of this channel; timeout ", deadline.timeout().count(), " ms)"));
  set_culprits(&s, {CulpritReason::kMismatch, {peer}});
  return fail(std::move(s), peer);
}

absl::Status Channel::acquire_slot(bool will_write, const Deadline& deadline, int* slot) {
  *slot = static_cast<int>(chunks_++ % slot_free_after_.size());
  if (!will_write) return absl::OkStatus();
  return wait_all(slot_free_after_[*slot], deadline);
}

uint32_t Channel::post() {
  ChannelControl* own = controls_[rank_];
  ++steps_;
  // The store, then the load of `sleepers`, with a fence between: a peer
  // that counted itself in before reading the counter either saw this value
  // or gets woken. The fence is the sleeper's where the kernel gives it
  // (asymmetric_fence.h), else a full one here.
  uint32_t sleepers;
  if (light_posts_) {
    own->signal.value.store(steps_, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    sleepers = own->sleepers.value.load(std::memory_order_relaxed);
  } else {
    own->signal.value.store(steps_, std::memory_order_seq_cst);
    sleepers = own->sleepers.value.load(std::memory_order_seq_cst);
  }
  if (sleepers != 0) futex_wake_all(&own->signal.value);
  return steps_;
}

bool Channel::reached(int peer, uint32_t step) {
  if (static_cast<int32_t>(seen_[peer] - step) >= 0) return true;
  const uint32_t now = controls_[peer]->signal.value.load(std::memory_order_acquire);
  if (static_cast<int32_t>(now - seen_[peer]) > 0) seen_[peer] = now;
  return static_cast<int32_t>(now - step) >= 0;
}

absl::Status Channel::wait_for(int peer, uint32_t step, const Deadline& deadline) {
  absl::Status s = wait_for_step(peer, step, deadline);
  // A step of the current op (not of an earlier one, as a slot's reuse
  // waits for): the peer has stamped its op by then.
  if (s.ok() && checked_[peer] != ops_ && static_cast<int32_t>(step - op_first_step_) > 0) {
    return check_same_op(peer, deadline);
  }
  return s;
}

absl::Status Channel::wait_for_step(int peer, uint32_t step, const Deadline& deadline) {
  if (reached(peer, step)) return absl::OkStatus();
  if (!broken_.ok()) return broken_;
  // A peer last seen on this rank's CPU cannot run while this rank spins:
  // yield at once, and after a few such waits in a row the higher rank of
  // the two moves off the CPU (both moving would meet again elsewhere).
  const bool shared_cpu = peer_on_this_cpu(peer);
  shared_cpu_waits_ = shared_cpu ? shared_cpu_waits_ + 1 : 0;
  if (shared_cpu && rank_ > peer && policy_.move_off_shared_cpu &&
      shared_cpu_waits_ >= policy_.shared_cpu_waits_before_move) {
    shared_cpu_waits_ = 0;
    if (move_off_cpu(cpu_)) cpu_ = current_cpu();
  }
  SpinTimer spin(policy_.spin);
  if (!shared_cpu && spin_until(spin, [&] { return reached(peer, step); })) {
    return absl::OkStatus();
  }
  const Clock::time_point start = shared_cpu ? Clock::now() : spin.start();
  for (Clock::time_point now = Clock::now(); now - start < policy_.yield;) {
    if (reached(peer, step)) return absl::OkStatus();
    sched_yield();
    const Clock::time_point before = now;
    now = Clock::now();
    if (now - before >= policy_.contended_yield) {
      if (reached(peer, step)) return absl::OkStatus();
      break;
    }
  }
  if (absl::Status s = give_up_if_abandoned(peer, step, deadline); !s.ok()) return s;
  std::atomic<uint32_t>& signal = controls_[peer]->signal.value;
  std::atomic<uint32_t>& sleepers = controls_[peer]->sleepers.value;
  const Clock::time_point give_up_at = deadline.at(start);
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= give_up_at) {
      // Every peer that has not posted the step, not only the one awaited.
      std::vector<int> behind;
      for (int p = 0; p < size_; ++p) {
        if (p != rank_ && (p == peer || !reached(p, step))) behind.push_back(p);
      }
      std::string others;
      if (behind.size() > 1) {
        std::vector<int> rest;
        for (int p : behind) {
          if (p != peer) rest.push_back(p);
        }
        others = absl::StrCat("; ", rest.size() == 1 ? "rank " : "ranks ",
                              absl::StrJoin(rest, ", "), " did not post it either");
      }
      absl::Status s = absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", deadline.timeout().count(), " ms on the shared-memory path: no step ",
          step, " from rank ", peer, " (it is at step ", signal.load(std::memory_order_relaxed),
          "; stopped, hung or in another op", others, ")"));
      set_culprits(&s, {CulpritReason::kSilent, behind});
      return fail(std::move(s), peer);
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Without the fence on the posters' CPUs a post may miss this sleeper:
    // short sleeps then bound what that costs.
    const bool fenced = fence_every_poster();
    const uint32_t seen = signal.load(std::memory_order_seq_cst);
    if (static_cast<int32_t>(seen - step) < 0) {
      futex_wait(&signal, seen,
                 std::min<Clock::duration>(give_up_at - now,
                                           fenced ? kSleepSlice : kUnfencedSleepSlice));
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(peer, step)) return absl::OkStatus();
    if (absl::Status s = give_up_if_abandoned(peer, step, deadline); !s.ok()) return s;
    if (abort_ != nullptr && abort_->raised()) return fail(abort_->why(), abort_->culprit());
    if (const char* how = peers_[peer] != nullptr ? peers_[peer]->gone() : nullptr) {
      absl::Status s = absl::UnavailableError(absl::StrCat(
          "rank ", peer, " (", peers_[peer]->who(), ") ", how,
          " during the op on the shared-memory path (timeout ", deadline.timeout().count(),
          " ms)"));
      set_culprits(&s, {CulpritReason::kExited, {peer}});
      return fail(std::move(s), peer);
    }
  }
}

bool Channel::peer_on_this_cpu(int peer) const {
  return cpu_ >= 0 && controls_[peer]->cpu.value.load(std::memory_order_relaxed) == cpu_;
}

template <typename Ready>
bool Channel::poll_peers(std::chrono::nanoseconds spin, Ready ready) {
  SpinTimer timer(spin);
  for (int k = 1; k < size_; ++k) {
    const int peer = (rank_ + k) % size_;
    if (ready(peer)) continue;
    if (peer_on_this_cpu(peer)) return false;  // it cannot run while this rank spins
    if (!spin_until(timer, [&] { return ready(peer); })) return false;
  }
  return true;
}

bool Channel::poll_all(uint32_t step, std::chrono::nanoseconds spin) {
  return poll_peers(spin, [&](int peer) { return reached(peer, step); });
}

void Channel::prepare_next_slot(size_t nbytes) const {
  const uint8_t* next = slots_[rank_][chunks_ % slot_free_after_.size()];
  for (size_t i = 0; i < std::min(nbytes, slot_bytes_); i += kCacheLine) {
    prefetch_for_write(next + i);
  }
}

uint32_t Channel::box_tag(size_t nbytes) const {
  static_assert(kBoxBytes < (1 << 13), "a box's size fits the tag's 13 bits");
  const uint32_t reduction = static_cast<uint32_t>(op_stamp_ >> kCodeShift) & 0x7f;
  return (ops_ & 0xfff) << 20 | reduction << 13 | static_cast<uint32_t>(nbytes);
}

// The lines of `box` that an op of `nbytes` fills: its data and seal.
static const uint8_t* box_lines_from(const InlineBox& box, size_t nbytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(box.run(nbytes));
  return reinterpret_cast<const uint8_t*>(first & ~(kCacheLine - 1));
}

absl::Status Channel::publish_box(const void* data, size_t nbytes, const Deadline& deadline,
                                  int* box, uint32_t* step) {
  *box = static_cast<int>(boxes_used_++ & 1);
  if (absl::Status s = wait_all(box_free_after_[*box], deadline); !s.ok()) return s;
  InlineBox& mine = controls_[rank_]->boxes[*box];
  const uint32_t next = steps_ + 1;  // the step post() completes below
  memcpy(mine.run(nbytes), data, nbytes);
  mine.seal.op = box_tag(nbytes);
  // After the data's stores (release): a peer that sees the step sees them.
  mine.seal.step.store(next, std::memory_order_release);
  *step = post();
  return absl::OkStatus();
}

bool Channel::box_ready(int peer, int box, uint32_t step) {
  const bool ready =
      controls_[peer]->boxes[box].seal.step.load(std::memory_order_acquire) == step;
  // The peer sealed its box right before it posts `step`: everything
  // before that post is done, its reads of this rank's slots and boxes too.
  if (ready && static_cast<int32_t>(step - seen_[peer]) > 0) seen_[peer] = step;
  return ready;
}

bool Channel::poll_boxes(int box, uint32_t step, std::chrono::nanoseconds spin, PollClock clock,
                         int64_t* seen_at) {
  // The clock read goes before the look: it does not wait for the line,
  // so the look that finds the data is not delayed by it.
  return poll_peers(spin, [&](int peer) {
    if (clock != nullptr) *seen_at = clock();
    return box_ready(peer, box, step);
  });
}

absl::Status Channel::wait_boxes(int box, uint32_t step, size_t nbytes, const Deadline& deadline) {
  const uint32_t tag = box_tag(nbytes);
  for (int k = 1; k < size_; ++k) {
    const int peer = (rank_ + k) % size_;
    if (!box_ready(peer, box, step)) {
      // Spin on the seal first (the data's last line comes with it); then
      // the counter's wait, which yields, sleeps, and gives up at the
      // deadline or when the peer is gone (the peer posts right after
      // sealing its box).
      SpinTimer timer(policy_.spin);
      const bool ready = !peer_on_this_cpu(peer) &&
                         spin_until(timer, [&] { return box_ready(peer, box, step); });
      if (!ready) {
        if (absl::Status s = wait_for(peer, step, deadline); !s.ok()) return s;
      }
    }
    const InlineBox& theirs = controls_[peer]->boxes[box];
    // Every line of the data asked for at once (the seal's is here
    // already): the reduction would take them one miss after another.
    const uint8_t* end = reinterpret_cast<const uint8_t*>(&theirs.seal);
    for (const uint8_t* line = box_lines_from(theirs, nbytes); line < end; line += kCacheLine) {
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    }
    if (box_ready(peer, box, step) && theirs.seal.op == tag) {
      checked_[peer] = ops_;
      continue;
    }
    // The peer posted the step without this op's data in its box: it runs
    // another op (its stamp says which, when it is of this op's number).
    if (checked_[peer] != ops_) {
      if (absl::Status s = check_same_op(peer, deadline); !s.ok()) return s;
    }
    absl::Status s = absl::InvalidArgumentError(absl::StrCat(
        "rank ", peer, " is out of step on the shared-memory path: it posted step ", step,
        " without the data of this rank's op ", ops_, " (", description_of(op_stamp_).str(),
        "; timeout ", deadline.timeout().count(), " ms)"));
    set_culprits(&s, {CulpritReason::kMismatch, {peer}});
    return fail(std::move(s), peer);
  }
  return absl::OkStatus();
}

void Channel::prepare_next_box(int box, size_t nbytes) const {
  const InlineBox& next = controls_[rank_]->boxes[box ^ 1];
  const uint8_t* end = reinterpret_cast<const uint8_t*>(&next + 1);
  for (const uint8_t* line = box_lines_from(next, nbytes); line < end; line += kCacheLine) {
    prefetch_for_write(line);
  }
}

absl::Status Channel::wait_all(uint32_t step, const Deadline& deadline) {
  for (int k = 1; k < size_; ++k) {
    absl::Status s = wait_for((rank_ + k) % size_, step, deadline);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace shm
}  // namespace ddpx
