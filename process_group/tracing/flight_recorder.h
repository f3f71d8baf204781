// The flight recorder: a fixed-size ring of the last collective and
// point-to-point ops of every group in this process, kept so that a hang or
// a desync can be explained after the fact ("who never entered allreduce
// #1234 of group default_pg, and who called something else").
//
// Every op the ProcessGroup front end admits is recorded with its group, a
// per-group sequence number (collectives and point-to-point ops counted
// apart, the same on every rank as long as the ranks issue the same ops),
// op, dtypes, element counts, root or peer, the call site (TraceSite: the
// DDP bucket or hook that issued it) and the timestamps of enqueue, start
// and completion, or the error. The backend that runs the op marks start
// and completion where it can (Gloo does); otherwise the front end marks
// completion from the Work's future.
//
// Cost: no allocation per op; atomic increments for the group's sequence
// number and the record id, a per-slot spin lock (uncontended: the slot is
// written by one op at a time) around plain stores to two cache lines (a
// third when a TraceSite is active), two clock reads (enqueue, completion;
// an op begun on the issuing thread at issue takes its enqueue time as its
// start). A backend that claims every op (Backend::claims_traces) gets the
// op pending and records it when it claims it, or later (DeferredTrace):
// the small shared-memory allreduce records while its data is on the way
// to its peers, off its critical path. DDPX_TRACE_BUFFER_SIZE sets the
// number of entries (default 2000, 0 turns recording off); set_capacity()
// and set_enabled() change it at run time.
//
// Failures go through failed(), which names the op, its sequence number,
// group and the peers the transport was still waiting for (culprits.h), and
// hands the report to a FailureListener (trace_service.h: peer states
// through the store, dumps on every rank).
#ifndef DDPX_PROCESS_GROUP_TRACING_FLIGHT_RECORDER_H_
#define DDPX_PROCESS_GROUP_TRACING_FLIGHT_RECORDER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/culprits.h"
#include "core/dtype.h"
#include "core/options.h"
#include "core/tensor.h"
#include "core/work.h"

namespace ddpx {

class FlightRecorder;
class Store;

inline bool is_point_to_point(OpType op) {
  return op == OpType::kSend || op == OpType::kRecv || op == OpType::kRecvAnysource;
}

// The arguments of an op as recorded: plain data, no allocation.
struct TraceOp {
  static constexpr int kMaxTensors = 4;
  uint16_t ntensors = 0;  // every tensor, even past kMaxTensors
  DType dtypes[kMaxTensors] = {};
  int64_t numel[kMaxTensors] = {};  // of the first kMaxTensors
  int64_t total_numel = 0;          // of all of them
  int32_t root = -1;                // broadcast, reduce, gather, scatter
  int32_t peer = -1;                // send, recv (recv_anysource: -1)
  int32_t tag = 0;                  // send, recv
  int8_t reduce_op = -1;            // a ReduceOp, or -1

  void add(const Tensor& tensor);
  void add(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors) add(t);
  }
};

enum class TraceState : uint8_t { kEnqueued, kStarted, kCompleted, kFailed, kCancelled };
const char* trace_state_name(TraceState state);

// One recorded op.
struct TraceEntry {
  uint64_t id = 0;     // 1, 2, ... in record order over the process's life
  int32_t group = -1;  // index in the group table (TraceGroupInfo)
  uint64_t seq = 0;    // the group's collective (or p2p) sequence number
  OpType op = OpType::kAllreduce;
  bool p2p = false;
  TraceState state = TraceState::kEnqueued;
  TraceOp args;
  int64_t timeout_ms = 0;
  // CLOCK_MONOTONIC nanoseconds (in snapshots); 0 when it has not happened
  // (yet).
  int64_t enqueued_ns = 0;
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  // The TraceSite active on the issuing thread ("" when none).
  char site[32] = {};
  int64_t site_bucket = -1;
  int64_t site_step = -1;
};

// What the recorder knows of a group.
struct TraceGroupInfo {
  int32_t index = -1;
  std::string name;        // "default_pg", "group_1", ... (the store prefix)
  int rank = -1;           // this process's rank in the group
  int size = 0;
  std::vector<int> ranks;  // the default group's ranks of the members, if known
  std::string backend;
  bool alive = true;       // false once every ProcessGroup on it is gone
  uint64_t next_seq = 0;   // at snapshot time
  uint64_t next_p2p_seq = 0;
};

// A failure as recorded, with what was learnt about the peers.
struct TraceError {
  uint64_t id = 0;  // the entry's
  int32_t group = -1;
  uint64_t seq = 0;
  OpType op = OpType::kAllreduce;
  std::string message;  // the error the caller got
  std::optional<Culprits> culprits;
  std::vector<std::string> peer_states;  // "rank 3: ..." lines
};

// A group as the front end holds it: the sequence counters and the index of
// its row in the table. ProcessGroups built over the same store object share
// one (examples/trainer's TimedBackend wraps a group that way).
class TraceGroup {
 public:
  ~TraceGroup();
  TraceGroup(const TraceGroup&) = delete;
  TraceGroup& operator=(const TraceGroup&) = delete;

  int32_t index() const { return index_; }
  FlightRecorder& recorder() const { return *recorder_; }

 private:
  friend class FlightRecorder;
  TraceGroup(FlightRecorder* recorder, int32_t index) : recorder_(recorder), index_(index) {}

  FlightRecorder* const recorder_;
  const int32_t index_;
  std::atomic<uint64_t> next_seq_{0};
  std::atomic<uint64_t> next_p2p_seq_{0};
};

// One recorded op, as the front end hands it to the backend that runs it.
struct TraceHandle {
  FlightRecorder* recorder = nullptr;
  uint64_t id = 0;  // 0: not recorded (recorder off)
  int32_t group = -1;
  uint64_t seq = 0;
  OpType op = OpType::kAllreduce;
  bool p2p = false;
  std::chrono::milliseconds timeout{0};
  // The ring slot record() wrote (FlightRecorder::Slot; rings live as long
  // as their recorder): start and completion find it without a division.
  void* slot = nullptr;
  // When it was recorded (TraceClock ticks), for started_at_issue().
  int64_t enqueued = 0;

  explicit operator bool() const { return id != 0; }
  void started() const;
  // The op began on the issuing thread right after it was recorded: its
  // start is its enqueue time (no second clock read for the same moment).
  void started_at_issue() const;
  void completed() const;
  // Completed, at `ticks` (TraceClock) read by the caller: a waiter that
  // reads the clock while it polls has the moment its data came.
  void completed_at(int64_t ticks) const;
  // The error to hand to the caller (see FlightRecorder::failed).
  absl::Status failed(absl::Status error) const;
};

// Where ops are issued from, for the record: set by a scope on the issuing
// thread (the reducer sets one per bucket). `what` must outlive the scope;
// it is copied (31 bytes at most) into each entry.
class TraceSite {
 public:
  explicit TraceSite(const char* what, int64_t bucket = -1, int64_t step = -1);
  ~TraceSite();
  TraceSite(const TraceSite&) = delete;
  TraceSite& operator=(const TraceSite&) = delete;

  static const TraceSite* current();
  const char* what() const { return what_; }
  int64_t bucket() const { return bucket_; }
  int64_t step() const { return step_; }

 private:
  const char* what_;
  int64_t bucket_;
  int64_t step_;
  const TraceSite* previous_;
};

// An op the front end hands over without recording it first, for a backend
// that records it itself (Backend::claims_traces): what record() takes.
struct PendingTrace {
  TraceGroup* group = nullptr;
  OpType op = OpType::kAllreduce;
  const TraceOp* args = nullptr;
  std::chrono::milliseconds timeout{0};
};

class CurrentTrace;

// A claimed op whose record the backend writes when it chooses, before it
// returns: a small op on the shared-memory path records while its data is
// on the way to the peers, so the recording adds nothing to its latency.
class DeferredTrace {
 public:
  DeferredTrace() = default;
  // The op's handle, recording it now if nobody has (the first call
  // records; empty when there is no op or the recorder is off). Only
  // before the backend call returns.
  TraceHandle record();

 private:
  friend class CurrentTrace;
  explicit DeferredTrace(CurrentTrace* current) : current_(current) {}
  CurrentTrace* current_ = nullptr;
};

// The op the front end is handing to a backend on this thread: a backend that
// marks start and completion itself claims it (Gloo's enqueue does); the
// front end marks completion of unclaimed ops from their Work's future.
class CurrentTrace {
 public:
  explicit CurrentTrace(const TraceHandle& handle);
  // Not recorded yet: claim() records it, a DeferredTrace when asked, and
  // recorded() at the latest.
  explicit CurrentTrace(const PendingTrace& pending);
  ~CurrentTrace();
  CurrentTrace(const CurrentTrace&) = delete;
  CurrentTrace& operator=(const CurrentTrace&) = delete;

  bool claimed() const { return claimed_; }
  // The op's handle, recording it first if it is still pending.
  TraceHandle recorded();
  // The op being handed over on this thread, once; an empty handle when
  // there is none or it was claimed already.
  static TraceHandle claim();
  // The same op, for a backend that records it later (DeferredTrace).
  static DeferredTrace claim_deferred();

 private:
  TraceHandle handle_;
  PendingTrace pending_;  // its group is null once recorded (or never pending)
  bool claimed_ = false;
  CurrentTrace* previous_;
};

// Told about every failure recorded (trace_service.h).
class FailureListener {
 public:
  virtual ~FailureListener() = default;
  // What the failed op's peers were last seen doing ("rank 3: ..." lines;
  // empty when unknown). Called on the failing thread before the caller
  // sees the error; must return within a bounded time.
  virtual std::vector<std::string> peer_states(const TraceGroupInfo& group,
                                               const Culprits& culprits) = 0;
  // The failure has been recorded: dump (the listener decides how).
  virtual void on_failure(const TraceError& error) = 0;
};

class FlightRecorder {
 public:
  static constexpr size_t kDefaultCapacity = 2000;

  // The process-wide recorder every ProcessGroup uses; its capacity comes
  // from DDPX_TRACE_BUFFER_SIZE (default kDefaultCapacity, 0: off).
  static FlightRecorder& get();

  explicit FlightRecorder(size_t capacity = kDefaultCapacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Entries kept (the oldest are overwritten); 0 turns recording off.
  // Changing it drops what was recorded.
  void set_capacity(size_t capacity);
  size_t capacity() const;
  // Recording on or off without changing the capacity (the benchmark
  // alternates them).
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const;

  // The group of ProcessGroups built over `store` (or, without a store,
  // `key`) as `rank`: the existing one while it lives, else a new row named after the
  // store's prefixes ("default_pg", "group_1"; "#2" added when a name
  // comes back after its group was destroyed).
  std::shared_ptr<TraceGroup> attach_group(const std::shared_ptr<Store>& store,
                                           const void* key, int rank, int size,
                                           const std::string& backend);
  // The members' ranks in the default group, when the caller knows them.
  void set_group_ranks(int32_t group, std::vector<int> ranks);
  // A snapshot of one row (its sequence counters included), or of all.
  TraceGroupInfo group_info(int32_t group) const;
  std::vector<TraceGroupInfo> groups() const;
  // The group's store, while it lives (for peer states).
  std::shared_ptr<Store> group_store(int32_t group) const;

  // Records an op about to be handed to the backend.
  TraceHandle record(TraceGroup& group, OpType op, const TraceOp& args,
                     std::chrono::milliseconds timeout);
  void started(const TraceHandle& handle);
  void started_at_issue(const TraceHandle& handle);
  void completed(const TraceHandle& handle);
  void completed_at(const TraceHandle& handle, int64_t ticks);
  // Records the failure and returns the error for the caller: the op, its
  // sequence number and group in front ("allreduce #1234 of group
  // default_pg (rank 0 of 4) timed out after 30 s: no data from rank 3"),
  // the peers' states where the listener learnt them, then `error`'s own
  // text. Same code and payloads as `error`. Cancelled errors pass through.
  absl::Status failed(const TraceHandle& handle, absl::Status error);

  // "in allreduce #12 for 3.1 s" / "idle since allreduce #11 completed 0.2 s
  // ago" / "no op recorded": this rank's state in `group`.
  std::string describe_state(int32_t group) const;

  void set_failure_listener(FailureListener* listener) {
    listener_.store(listener, std::memory_order_release);
  }

  struct Snapshot {
    std::vector<TraceEntry> entries;  // oldest first
    std::vector<TraceGroupInfo> groups;
    std::vector<TraceError> errors;   // the last kKeptErrors
    uint64_t recorded = 0;            // ops recorded over the process's life
    size_t capacity = 0;
  };
  Snapshot snapshot() const;

  static constexpr size_t kKeptErrors = 64;

 private:
  // The op's arguments are written once, by record() under `busy`; its
  // progress (start, end, state) afterwards without the lock by whichever
  // thread runs the op, as atomics, after checking `id` (a slot overwritten
  // in the meantime, 'capacity' ops later, is left alone). Timestamps are
  // TraceClock ticks; snapshots convert them.
  //
  // Three cache lines, so that an op writes no more than it records: the
  // first holds what record() and completion both write (the lock, id,
  // progress, group, sequence number), the second the arguments, the third
  // the call site, written and read only when there is one (`has_site`).
  struct alignas(64) Slot {
    // Line 0.
    std::atomic<uint32_t> busy{0};
    std::atomic<uint8_t> state{0};
    OpType op = OpType::kAllreduce;
    bool p2p = false;
    bool has_site = false;
    std::atomic<uint64_t> id{0};
    std::atomic<int64_t> started{0};
    std::atomic<int64_t> ended{0};
    int64_t enqueued = 0;
    uint64_t seq = 0;
    int64_t timeout_ms = 0;
    int32_t group = -1;
    // Line 1.
    alignas(64) TraceOp args;
    // Line 2.
    alignas(64) char site[32] = {};
    int64_t site_bucket = -1;
    int64_t site_step = -1;
  };
  // The slots are a power of two, so that an id finds its slot with a mask;
  // snapshots keep the newest `capacity` of what they hold.
  struct Ring {
    explicit Ring(size_t n);
    const size_t capacity;
    const size_t mask;  // slots - 1
    std::unique_ptr<Slot[]> slots;
  };
  static void lock(Slot& slot);
  static void unlock(Slot& slot) { slot.busy.store(0, std::memory_order_release); }
  // The handle's slot while it still holds the handle's op, else null.
  static Slot* slot_of(const TraceHandle& handle);
  // A copy of the slot's entry, progress included, in ticks; id 0 if empty.
  static TraceEntry read_slot(Slot& slot);
  void finish(const TraceHandle& handle, TraceState state, int64_t ticks);
  void group_gone(int32_t index);
  std::string group_name_locked(int32_t index) const;

  friend class TraceGroup;

  std::atomic<bool> enabled_{true};
  std::atomic<Ring*> ring_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<FailureListener*> listener_{nullptr};

  mutable std::mutex mu_;  // everything below; never taken per op
  std::vector<std::unique_ptr<Ring>> rings_;  // the current one last; older ones kept
  std::vector<TraceGroupInfo> groups_;
  std::vector<std::weak_ptr<TraceGroup>> group_handles_;
  std::vector<std::weak_ptr<Store>> group_stores_;
  std::map<std::pair<const void*, int>, int32_t> group_by_key_;  // (store, rank)
  std::map<std::pair<std::string, int>, int> name_uses_;  // (name, rank)
  std::deque<TraceError> errors_;
};

// The front end's one hook: records the op, hands it to `launch` (which
// calls the backend) with the record current on this thread, and, when the
// backend did not claim it (CurrentTrace::claim), marks its completion from
// the Work's future.
// With `backend_records` (the backend claims every op, Backend::
// claims_traces) the record is written when the backend claims it, or
// right after the call at the latest.
template <typename Launch>
std::shared_ptr<Work> launch_traced(TraceGroup& group, OpType op, const TraceOp& args,
                                    std::chrono::milliseconds timeout, bool backend_records,
                                    Launch launch) {
  TraceHandle handle;
  std::shared_ptr<Work> work;
  bool claimed;
  if (backend_records) {
    if (!group.recorder().enabled()) return launch();
    CurrentTrace current(PendingTrace{&group, op, &args, timeout});
    work = launch();
    claimed = current.claimed();
    handle = current.recorded();
  } else {
    handle = group.recorder().record(group, op, args, timeout);
    if (!handle) return launch();
    CurrentTrace current(handle);
    work = launch();
    claimed = current.claimed();
  }
  if (!handle) return work;
  if (!claimed && work != nullptr) {
    work->get_future()->add_callback([handle](Future<TensorList>& done) {
      absl::Status s = done.status();
      if (s.ok()) {
        handle.completed();
      } else {
        handle.failed(std::move(s)).IgnoreError();
      }
    });
  }
  return work;
}

// The recorder's clock: the CPU's time-stamp counter where it is invariant
// (constant_tsc and nonstop_tsc: a read costs a third of clock_gettime's),
// else CLOCK_MONOTONIC; DDPX_TRACE_CLOCK=monotonic forces the latter.
// Entries keep ticks; to_ns turns them into CLOCK_MONOTONIC nanoseconds.
class TraceClock {
 public:
  static int64_t now();
  // A conversion for many ticks at once (calibrated against
  // CLOCK_MONOTONIC over the process's life so far, at least 20 ms).
  struct ToNs {
    int64_t ticks0 = 0;
    int64_t ns0 = 0;
    double ns_per_tick = 1.0;
    int64_t operator()(int64_t ticks) const {
      return ticks == 0 ? 0 : ns0 + static_cast<int64_t>((ticks - ticks0) * ns_per_tick);
    }
  };
  static ToNs converter();
  static bool uses_tsc();
};

// "3 s", "1500 ms".
std::string format_timeout(std::chrono::milliseconds timeout);
// The store's prefixes joined by '/' ("default_pg", "group_1/int8_local"),
// or "" for a store that is not a PrefixStore.
std::string store_prefix_path(const Store* store);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_TRACING_FLIGHT_RECORDER_H_
