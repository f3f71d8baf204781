#include "process_group/tracing/flight_recorder.h"

#include <immintrin.h>
#include <sched.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace {

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool invariant_tsc() {
  const char* forced = std::getenv("DDPX_TRACE_CLOCK");
  if (forced != nullptr && std::string(forced) == "monotonic") return false;
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, "flags", 5) != 0) continue;
    constant = strstr(line, " constant_tsc") != nullptr;
    nonstop = strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  fclose(f);
  return constant && nonstop;
}

// Where the clock started: (ticks, CLOCK_MONOTONIC ns) read together.
struct ClockBase {
  bool tsc;
  int64_t ticks0;
  int64_t ns0;
};

const ClockBase& clock_base() {
  static const ClockBase base = [] {
    ClockBase b;
    b.tsc = invariant_tsc();
    b.ns0 = monotonic_ns();
    b.ticks0 = b.tsc ? static_cast<int64_t>(__rdtsc()) : b.ns0;
    return b;
  }();
  return base;
}

thread_local const TraceSite* t_site = nullptr;
thread_local CurrentTrace* t_current = nullptr;

// A ring's slots for `capacity` entries: the power of two at or above it.
size_t slots_for(size_t capacity) {
  size_t n = 1;
  while (n < capacity) n *= 2;
  return n;
}

size_t capacity_from_env() {
  const char* v = std::getenv("DDPX_TRACE_BUFFER_SIZE");
  if (v == nullptr || *v == '\0') return FlightRecorder::kDefaultCapacity;
  uint64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n > (uint64_t{1} << 24)) {
    fprintf(stderr,
            "ddpx: warning: DDPX_TRACE_BUFFER_SIZE='%s' is not a number of entries (0 to 16M); "
            "the flight recorder keeps %zu\n",
            v, FlightRecorder::kDefaultCapacity);
    return FlightRecorder::kDefaultCapacity;
  }
  return static_cast<size_t>(n);
}

std::string seconds_ago(int64_t then_ns, int64_t now) {
  return absl::StrFormat("%.1f s", static_cast<double>(now - then_ns) / 1e9);
}

std::string ranks_text(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

}  // namespace

const char* trace_state_name(TraceState state) {
  switch (state) {
    case TraceState::kEnqueued: return "enqueued";
    case TraceState::kStarted: return "started";
    case TraceState::kCompleted: return "completed";
    case TraceState::kFailed: return "failed";
    case TraceState::kCancelled: return "cancelled";
  }
  return "unknown";
}

int64_t TraceClock::now() {
  return clock_base().tsc ? static_cast<int64_t>(__rdtsc()) : monotonic_ns();
}

bool TraceClock::uses_tsc() { return clock_base().tsc; }

TraceClock::ToNs TraceClock::converter() {
  const ClockBase& base = clock_base();
  ToNs c;
  c.ticks0 = base.ticks0;
  c.ns0 = base.ns0;
  if (!base.tsc) return c;
  int64_t ns = monotonic_ns();
  if (ns - base.ns0 < 20'000'000) {  // too short a span for a good rate
    std::this_thread::sleep_for(std::chrono::nanoseconds(20'000'000 - (ns - base.ns0)));
  }
  const int64_t ticks = static_cast<int64_t>(__rdtsc());
  ns = monotonic_ns();
  c.ns_per_tick = ticks > base.ticks0 ? static_cast<double>(ns - base.ns0) / (ticks - base.ticks0)
                                      : 1.0;
  return c;
}

void TraceOp::add(const Tensor& tensor) {
  if (ntensors < kMaxTensors) {
    dtypes[ntensors] = tensor.dtype();
    numel[ntensors] = tensor.numel();
  }
  if (ntensors < UINT16_MAX) ++ntensors;
  total_numel += tensor.numel();
}

std::string format_timeout(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  if (ms >= 1000 && ms % 1000 == 0) return absl::StrCat(ms / 1000, " s");
  return absl::StrCat(ms, " ms");
}

std::string store_prefix_path(const Store* store) {
  std::vector<std::string> parts;
  while (const auto* p = dynamic_cast<const PrefixStore*>(store)) {
    parts.push_back(p->prefix());
    store = p->underlying().get();
  }
  std::reverse(parts.begin(), parts.end());
  return absl::StrJoin(parts, "/");
}

// ---- TraceSite, CurrentTrace ----

TraceSite::TraceSite(const char* what, int64_t bucket, int64_t step)
    : what_(what == nullptr ? "" : what), bucket_(bucket), step_(step), previous_(t_site) {
  t_site = this;
}

TraceSite::~TraceSite() { t_site = previous_; }

const TraceSite* TraceSite::current() { return t_site; }

CurrentTrace::CurrentTrace(const TraceHandle& handle) : handle_(handle), previous_(t_current) {
  t_current = this;
}

CurrentTrace::CurrentTrace(const PendingTrace& pending)
    : pending_(pending), previous_(t_current) {
  t_current = this;
}

CurrentTrace::~CurrentTrace() { t_current = previous_; }

TraceHandle CurrentTrace::recorded() {
  if (pending_.group != nullptr) {
    handle_ = pending_.group->recorder().record(*pending_.group, pending_.op, *pending_.args,
                                                pending_.timeout);
    pending_.group = nullptr;
  }
  return handle_;
}

TraceHandle CurrentTrace::claim() {
  CurrentTrace* c = t_current;
  if (c == nullptr || c->claimed_) return TraceHandle{};
  c->claimed_ = true;
  return c->recorded();
}

DeferredTrace CurrentTrace::claim_deferred() {
  CurrentTrace* c = t_current;
  if (c == nullptr || c->claimed_) return DeferredTrace{};
  c->claimed_ = true;
  return DeferredTrace(c);
}

TraceHandle DeferredTrace::record() {
  return current_ == nullptr ? TraceHandle{} : current_->recorded();
}

void TraceHandle::started() const {
  if (recorder != nullptr) recorder->started(*this);
}
void TraceHandle::started_at_issue() const {
  if (recorder != nullptr) recorder->started_at_issue(*this);
}
void TraceHandle::completed_at(int64_t ticks) const {
  if (recorder != nullptr) recorder->completed_at(*this, ticks);
}
void TraceHandle::completed() const {
  if (recorder != nullptr) recorder->completed(*this);
}
absl::Status TraceHandle::failed(absl::Status error) const {
  if (recorder == nullptr) return error;
  return recorder->failed(*this, std::move(error));
}

// ---- TraceGroup ----

TraceGroup::~TraceGroup() { recorder_->group_gone(index_); }

// ---- FlightRecorder ----

FlightRecorder& FlightRecorder::get() {
  // Leaked: ops may complete on backend threads during static destruction.
  static FlightRecorder* recorder = new FlightRecorder(capacity_from_env());
  return *recorder;
}

static_assert(sizeof(TraceOp) <= 64, "a slot keeps an op's arguments in one cache line");

FlightRecorder::Ring::Ring(size_t n)
    : capacity(n), mask(slots_for(n) - 1), slots(new Slot[slots_for(n)]) {}

FlightRecorder::FlightRecorder(size_t capacity) {
  rings_.push_back(std::make_unique<Ring>(capacity));
  ring_.store(rings_.back().get(), std::memory_order_release);
}

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::set_capacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  // Ops in flight may still hold the old ring: it is kept (their updates
  // find their ids gone from the new one and are dropped).
  rings_.push_back(std::make_unique<Ring>(capacity));
  ring_.store(rings_.back().get(), std::memory_order_release);
}

size_t FlightRecorder::capacity() const {
  return ring_.load(std::memory_order_acquire)->capacity;
}

bool FlightRecorder::enabled() const {
  return enabled_.load(std::memory_order_relaxed) && capacity() > 0;
}

void FlightRecorder::lock(Slot& slot) {
  while (slot.busy.exchange(1, std::memory_order_acquire) != 0) {
    // Held by a snapshot (or an op 'capacity' records older): brief.
    for (int i = 0; slot.busy.load(std::memory_order_relaxed) != 0; ++i) {
      if (i < 64) {
        _mm_pause();
      } else {
        sched_yield();
      }
    }
  }
}

FlightRecorder::Slot* FlightRecorder::slot_of(const TraceHandle& handle) {
  Slot* slot = static_cast<Slot*>(handle.slot);
  if (slot == nullptr || handle.id == 0) return nullptr;
  return slot->id.load(std::memory_order_acquire) == handle.id ? slot : nullptr;
}

TraceEntry FlightRecorder::read_slot(Slot& slot) {
  TraceEntry e;
  lock(slot);
  e.id = slot.id.load(std::memory_order_relaxed);
  if (e.id != 0) {
    e.state = static_cast<TraceState>(slot.state.load(std::memory_order_acquire));
    e.started_ns = slot.started.load(std::memory_order_relaxed);
    e.ended_ns = slot.ended.load(std::memory_order_relaxed);
    e.group = slot.group;
    e.seq = slot.seq;
    e.op = slot.op;
    e.p2p = slot.p2p;
    e.args = slot.args;
    e.timeout_ms = slot.timeout_ms;
    e.enqueued_ns = slot.enqueued;
    if (slot.has_site) {
      memcpy(e.site, slot.site, sizeof(e.site));
      e.site_bucket = slot.site_bucket;
      e.site_step = slot.site_step;
    }
  }
  unlock(slot);
  return e;
}

std::shared_ptr<TraceGroup> FlightRecorder::attach_group(const std::shared_ptr<Store>& store,
                                                         const void* key, int rank, int size,
                                                         const std::string& backend) {
  const std::pair<const void*, int> k(
      store != nullptr ? static_cast<const void*>(store.get()) : key, rank);
  std::lock_guard<std::mutex> lock(mu_);
  auto found = group_by_key_.find(k);
  if (found != group_by_key_.end()) {
    if (std::shared_ptr<TraceGroup> g = group_handles_[found->second].lock()) return g;
  }
  const auto index = static_cast<int32_t>(groups_.size());
  TraceGroupInfo info;
  info.index = index;
  std::string base = store_prefix_path(store.get());
  if (base.empty()) base = "pg";
  const int uses = name_uses_[{base, rank}]++;
  info.name = uses == 0 ? base : absl::StrCat(base, "#", uses + 1);
  info.rank = rank;
  info.size = size;
  info.backend = backend;
  groups_.push_back(std::move(info));
  std::shared_ptr<TraceGroup> g(new TraceGroup(this, index));
  group_handles_.push_back(g);
  group_stores_.push_back(store);
  group_by_key_[k] = index;
  return g;
}

void FlightRecorder::group_gone(int32_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < 0 || static_cast<size_t>(index) >= groups_.size()) return;
  groups_[index].alive = false;
  group_stores_[index].reset();
  for (auto it = group_by_key_.begin(); it != group_by_key_.end();) {
    it = it->second == index ? group_by_key_.erase(it) : std::next(it);
  }
}

void FlightRecorder::set_group_ranks(int32_t group, std::vector<int> ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (group >= 0 && static_cast<size_t>(group) < groups_.size()) {
    groups_[group].ranks = std::move(ranks);
  }
}

TraceGroupInfo FlightRecorder::group_info(int32_t group) const {
  // Released after the lock: the last reference's destructor takes it.
  std::shared_ptr<TraceGroup> keep;
  std::lock_guard<std::mutex> lock(mu_);
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) return TraceGroupInfo{};
  TraceGroupInfo info = groups_[group];
  keep = group_handles_[group].lock();
  if (keep != nullptr) {
    info.next_seq = keep->next_seq_.load(std::memory_order_relaxed);
    info.next_p2p_seq = keep->next_p2p_seq_.load(std::memory_order_relaxed);
  }
  return info;
}

std::vector<TraceGroupInfo> FlightRecorder::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

std::shared_ptr<Store> FlightRecorder::group_store(int32_t group) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) return nullptr;
  return group_stores_[group].lock();
}

std::string FlightRecorder::group_name_locked(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= groups_.size()) return "?";
  return groups_[index].name;
}

TraceHandle FlightRecorder::record(TraceGroup& group, OpType op, const TraceOp& args,
                                   std::chrono::milliseconds timeout) {
  if (!enabled_.load(std::memory_order_relaxed)) return TraceHandle{};
  Ring* ring = ring_.load(std::memory_order_acquire);
  if (ring->capacity == 0) return TraceHandle{};
  const bool p2p = is_point_to_point(op);
  TraceHandle h;
  h.recorder = this;
  h.group = group.index_;
  h.seq = (p2p ? group.next_p2p_seq_ : group.next_seq_).fetch_add(1, std::memory_order_relaxed);
  h.op = op;
  h.p2p = p2p;
  h.timeout = timeout;
  h.id = next_id_.fetch_add(1, std::memory_order_relaxed);
  h.enqueued = TraceClock::now();
  const TraceSite* site = t_site;
  const size_t index = h.id & ring->mask;
  Slot& slot = ring->slots[index];
  h.slot = &slot;
  lock(slot);
  slot.id.store(0, std::memory_order_relaxed);  // updates for the op it held stop here
  slot.started.store(0, std::memory_order_relaxed);
  slot.ended.store(0, std::memory_order_relaxed);
  slot.state.store(static_cast<uint8_t>(TraceState::kEnqueued), std::memory_order_relaxed);
  slot.group = h.group;
  slot.seq = h.seq;
  slot.op = op;
  slot.p2p = p2p;
  slot.args = args;
  slot.timeout_ms = timeout.count();
  slot.enqueued = h.enqueued;
  slot.has_site = site != nullptr;
  if (site != nullptr) {
    strncpy(slot.site, site->what(), sizeof(slot.site) - 1);
    slot.site[sizeof(slot.site) - 1] = '\0';
    slot.site_bucket = site->bucket();
    slot.site_step = site->step();
  }
  slot.id.store(h.id, std::memory_order_release);
  unlock(slot);
  // The next op's slot, for writing: it is cold (the ring is larger than
  // the caches keep for it), and the op about to run gives the fetch time.
  // Its first two lines: the third is written only with a call site.
  const Slot* next = &ring->slots[(index + 1) & ring->mask];
  __builtin_prefetch(next, 1, 3);
  __builtin_prefetch(&next->args, 1, 3);
  return h;
}

void FlightRecorder::started(const TraceHandle& h) {
  if (!h) return;
  Slot* slot = slot_of(h);
  if (slot == nullptr) return;
  slot->started.store(TraceClock::now(), std::memory_order_relaxed);
  // Start and completion come from the thread running the op, in order.
  if (slot->state.load(std::memory_order_relaxed) == static_cast<uint8_t>(TraceState::kEnqueued)) {
    slot->state.store(static_cast<uint8_t>(TraceState::kStarted), std::memory_order_release);
  }
}

void FlightRecorder::started_at_issue(const TraceHandle& h) {
  if (!h) return;
  Slot* slot = slot_of(h);
  if (slot == nullptr) return;
  // Right after record(), on the same thread: nothing else has touched it.
  slot->started.store(h.enqueued, std::memory_order_relaxed);
  slot->state.store(static_cast<uint8_t>(TraceState::kStarted), std::memory_order_release);
}

void FlightRecorder::finish(const TraceHandle& h, TraceState state, int64_t ticks) {
  Slot* slot = slot_of(h);
  if (slot == nullptr) return;
  slot->ended.store(ticks, std::memory_order_relaxed);
  slot->state.store(static_cast<uint8_t>(state), std::memory_order_release);
}

void FlightRecorder::completed(const TraceHandle& h) {
  if (h) finish(h, TraceState::kCompleted, TraceClock::now());
}

void FlightRecorder::completed_at(const TraceHandle& h, int64_t ticks) {
  if (h) finish(h, TraceState::kCompleted, ticks);
}

absl::Status FlightRecorder::failed(const TraceHandle& h, absl::Status error) {
  if (!h || error.ok()) return error;
  const bool cancelled = error.code() == absl::StatusCode::kCancelled;
  finish(h, cancelled ? TraceState::kCancelled : TraceState::kFailed, TraceClock::now());
  if (cancelled) return error;
  // Refusals of the arguments are this rank's own business: recorded in the
  // entry, reported as they are, nobody else asked. (Ranks that disagree on
  // the arguments fail with InvalidArgument too, naming the peer.)
  const std::optional<Culprits> culprits = culprits_of(error);
  const absl::StatusCode code = error.code();
  if (!culprits.has_value() &&
      (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented ||
       code == absl::StatusCode::kOutOfRange)) {
    return error;
  }

  const TraceGroupInfo group = group_info(h.group);
  std::string head = absl::StrCat(op_type_name(h.op), " #", h.seq, h.p2p ? " (point-to-point)" : "",
                                  " of group ", group.name, " (rank ", group.rank, " of ",
                                  group.size, ")");
  if (error.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&head, " timed out after ", format_timeout(h.timeout));
  } else {
    absl::StrAppend(&head, " failed");
  }
  if (culprits.has_value()) {
    const std::string who = ranks_text(culprits->ranks);
    switch (culprits->reason) {
      case CulpritReason::kSilent:
        absl::StrAppend(&head, ": no data from ", who);
        break;
      case CulpritReason::kNotReceiving:
        absl::StrAppend(&head, ": ", who, (culprits->ranks.size() == 1 ? " never asks" : " never ask"),
                        " for this rank's data");
        break;
      case CulpritReason::kExited:
        absl::StrAppend(&head, ": ", who, " exited or closed the connection");
        break;
      case CulpritReason::kGaveUp:
        absl::StrAppend(&head, ": ", who, " gave up first");
        break;
      case CulpritReason::kMismatch:
        absl::StrAppend(&head, ": ", who, (culprits->ranks.size() == 1 ? " runs" : " run"),
                        " another op");
        break;
    }
  }
  TraceError record;
  record.id = h.id;
  record.group = h.group;
  record.seq = h.seq;
  record.op = h.op;
  record.culprits = culprits;
  FailureListener* listener = listener_.load(std::memory_order_acquire);
  if (listener != nullptr && culprits.has_value()) {
    record.peer_states = listener->peer_states(group, *culprits);
  }
  if (!record.peer_states.empty()) {
    absl::StrAppend(&head, " (", absl::StrJoin(record.peer_states, "; "), ")");
  }
  absl::Status out(error.code(), absl::StrCat(head, ". ", error.message()));
  error.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  record.message = std::string(out.message());
  {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(record);
    while (errors_.size() > kKeptErrors) errors_.pop_front();
  }
  if (listener != nullptr) listener->on_failure(record);
  return out;
}

std::string FlightRecorder::describe_state(int32_t group) const {
  Ring* ring = ring_.load(std::memory_order_acquire);
  // Only what a snapshot would keep: the newest `capacity` entries.
  const uint64_t newest = next_id_.load(std::memory_order_relaxed) - 1;
  const uint64_t oldest_kept = newest >= ring->capacity ? newest - ring->capacity + 1 : 1;
  TraceEntry last;
  for (size_t i = 0; i <= ring->mask; ++i) {
    TraceEntry e = read_slot(ring->slots[i]);
    if (e.id >= oldest_kept && e.group == group && e.id > last.id) last = e;
  }
  if (last.id == 0) return "no op recorded";
  const TraceClock::ToNs to_ns = TraceClock::converter();
  last.enqueued_ns = to_ns(last.enqueued_ns);
  last.started_ns = to_ns(last.started_ns);
  last.ended_ns = to_ns(last.ended_ns);
  const int64_t now = monotonic_ns();
  const std::string what = absl::StrCat(op_type_name(last.op), " #", last.seq);
  switch (last.state) {
    case TraceState::kEnqueued:
      return absl::StrCat("queued ", what, " ", seconds_ago(last.enqueued_ns, now), " ago");
    case TraceState::kStarted:
      return absl::StrCat("in ", what, " for ", seconds_ago(last.started_ns, now));
    case TraceState::kCompleted:
      return absl::StrCat("idle since ", what, " completed ", seconds_ago(last.ended_ns, now),
                          " ago");
    case TraceState::kFailed:
      return absl::StrCat(what, " failed ", seconds_ago(last.ended_ns, now), " ago");
    case TraceState::kCancelled:
      return absl::StrCat(what, " was cancelled");
  }
  return what;
}

FlightRecorder::Snapshot FlightRecorder::snapshot() const {
  Snapshot s;
  Ring* ring = ring_.load(std::memory_order_acquire);
  s.capacity = ring->capacity;
  s.entries.reserve(ring->mask + 1);
  for (size_t i = 0; i <= ring->mask; ++i) {
    TraceEntry e = read_slot(ring->slots[i]);
    if (e.id != 0) s.entries.push_back(e);
  }
  std::sort(s.entries.begin(), s.entries.end(),
            [](const TraceEntry& a, const TraceEntry& b) { return a.id < b.id; });
  // The ring's slots beyond the capacity hold older entries than it keeps.
  if (s.entries.size() > ring->capacity) {
    s.entries.erase(s.entries.begin(), s.entries.end() - ring->capacity);
  }
  const TraceClock::ToNs to_ns = TraceClock::converter();
  for (TraceEntry& e : s.entries) {
    e.enqueued_ns = to_ns(e.enqueued_ns);
    e.started_ns = to_ns(e.started_ns);
    e.ended_ns = to_ns(e.ended_ns);
  }
  s.recorded = next_id_.load(std::memory_order_relaxed) - 1;
  std::vector<std::shared_ptr<TraceGroup>> keep;  // released after the lock
  std::lock_guard<std::mutex> lock(mu_);
  s.groups = groups_;
  for (size_t i = 0; i < s.groups.size(); ++i) {
    keep.push_back(group_handles_[i].lock());
    if (keep.back() != nullptr) {
      s.groups[i].next_seq = keep.back()->next_seq_.load(std::memory_order_relaxed);
      s.groups[i].next_p2p_seq = keep.back()->next_p2p_seq_.load(std::memory_order_relaxed);
    }
  }
  s.errors.assign(errors_.begin(), errors_.end());
  return s;
}

}  // namespace ddpx
