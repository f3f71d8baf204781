#include "elastic/elastic_group.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/culprits.h"
#include "elastic/kill_point.h"
#include "elastic/membership_keys.h"
#include "process_group/rendezvous/init.h"
#include "store/prefix_store.h"

namespace ddpx::elastic {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<int64_t> parse_ids(absl::string_view text) {
  std::vector<int64_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t id = 0;
    if (absl::SimpleAtoi(part, &id)) ids.push_back(id);
  }
  return ids;
}

std::string join_ids(const std::vector<int64_t>& ids) { return absl::StrJoin(ids, ","); }

bool contains(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// a - b, in a's order.
std::vector<int64_t> minus(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t x : a)
    if (!contains(b, x)) out.push_back(x);
  return out;
}

bool is_timeout(const absl::Status& s) { return s.code() == absl::StatusCode::kDeadlineExceeded; }

absl::Status store_error(const absl::Status& s, const std::string& doing) {
  return absl::Status(s.code(), absl::StrCat("elastic: the job's store failed while ", doing,
                                             " (the store must outlive the ranks; is its "
                                             "server gone?): ",
                                             s.message()));
}

// The generation record the leader writes: "<members>|<admitted>|<previous>",
// or "END|<why>" when the job cannot go on.
struct Record {
  bool end = false;
  std::string why;
  std::vector<int64_t> members;
  int64_t admitted = 0;
  std::vector<int64_t> previous;
};

Record parse_record(const std::string& text) {
  Record r;
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('|', 2));
  if (!parts.empty() && parts[0] == "END") {
    r.end = true;
    r.why = parts.size() > 1 ? parts[1] : "";
    return r;
  }
  if (parts.size() > 0) r.members = parse_ids(parts[0]);
  if (parts.size() > 1) absl::SimpleAtoi(parts[1], &r.admitted);
  if (parts.size() > 2) r.previous = parse_ids(parts[2]);
  return r;
}

}  // namespace

ElasticGroup::ElasticGroup(const ElasticOptions& options)
    : options_(options),
      store_(options.store),
      watch_(options.heartbeat_interval * std::max(1, options.heartbeat_misses)) {}

ElasticGroup::~ElasticGroup() {
  heartbeat_.reset();  // its thread uses watch_
  pg_.reset();
  for (std::thread& t : retiring_) t.join();
}

void ElasticGroup::retire(std::shared_ptr<void> object) {
  if (object == nullptr) return;
  retiring_.emplace_back([o = std::move(object)]() mutable { o.reset(); });
}

absl::Status ElasticGroup::register_member() {
  absl::StatusOr<int64_t> id = store_->add(keys::kNextId, 1);
  if (!id.ok()) return store_error(id.status(), "registering this process");
  id_ = *id;
  if (absl::Status s = store_->set(keys::member(id_), this_process()); !s.ok())
    return store_error(s, "registering this process");
  absl::StatusOr<std::unique_ptr<Store>> beat_store = store_->clone();
  if (!beat_store.ok()) return store_error(beat_store.status(), "connecting the heartbeat");
  heartbeat_ = std::make_unique<Heartbeat>(
      *std::move(beat_store), id_, options_.heartbeat_interval, [this](Store& store) {
        std::vector<int64_t> members;
        {
          std::lock_guard<std::mutex> lock(watched_mu_);
          members = watched_;
        }
        if (watch_.refresh(store, members).ok()) abort_if_a_member_is_silent();
      });
  return heartbeat_->status();
}

absl::StatusOr<std::unique_ptr<ElasticGroup>> ElasticGroup::join(const ElasticOptions& o) {
  if (o.store == nullptr) return absl::InvalidArgumentError("elastic: ElasticOptions.store is null");
  if (o.min_size < 1 || o.expected_size < o.min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic: need 1 <= min_size <= expected_size, got min_size ", o.min_size,
        " and expected_size ", o.expected_size));
  }
  std::unique_ptr<ElasticGroup> g(new ElasticGroup(o));
  if (absl::Status s = g->register_member(); !s.ok()) return s;
  const Clock::time_point started = Clock::now();
  // Once a generation exists the job is running: wait for admission at a
  // step boundary. Before, this process is one of the first generation's.
  absl::StatusOr<bool> running = g->store_->check({keys::kGeneration});
  if (!running.ok()) return store_error(running.status(), "joining");
  int64_t next = 0;
  if (*running) {
    absl::StatusOr<std::string> cur = g->store_->get_string(keys::kGeneration);
    if (!cur.ok()) return store_error(cur.status(), "joining");
    absl::SimpleAtoi(*cur, &next);
    ++next;
    if (absl::Status s = g->announce_newcomer(); !s.ok()) return s;
  }
  absl::StatusOr<MembershipChange> c = g->form(next, {}, started, /*newcomer=*/*running);
  if (!c.ok()) return c.status();
  return g;
}

absl::Status ElasticGroup::announce_newcomer() {
  if (announced_) return absl::OkStatus();
  absl::StatusOr<int64_t> k = store_->add(keys::kPendingCount, 1);
  if (!k.ok()) return store_error(k.status(), "asking to join");
  if (absl::Status s = store_->set(keys::pending(*k - 1), absl::StrCat(id_)); !s.ok())
    return store_error(s, "asking to join");
  announced_ = true;
  return absl::OkStatus();
}

bool ElasticGroup::member_gone(int64_t member) {
  if (watch_.stale(member)) return true;
  // The launcher that started it says it ended (the quick way for kill -9).
  auto it = whereabouts_.find(member);
  if (it == whereabouts_.end()) {
    absl::StatusOr<std::string> who =
        store_->get_string(keys::member(member), std::chrono::seconds(5));
    if (!who.ok()) return false;
    it = whereabouts_.emplace(member, *who).first;
  }
  absl::StatusOr<bool> gone = store_->check({keys::gone(it->second)});
  return gone.ok() && *gone;
}

void ElasticGroup::abort_if_a_member_is_silent() {
  std::shared_ptr<Backend> backend;
  std::string why;
  int culprit = -1;
  {
    std::lock_guard<std::mutex> lock(watched_mu_);
    if (abortable_ == nullptr) return;
    for (size_t r = 0; r < watched_.size(); ++r) {
      if (watched_[r] == id_ || !watch_.stale(watched_[r])) continue;
      culprit = static_cast<int>(r);
      why = absl::StrCat("elastic: rank ", r, " (member ", watched_[r], ") sent no heartbeat for ",
                         watch_.dead_after().count(), " ms (stopped or hung): generation ",
                         abortable_generation_, "'s ops aborted");
      break;
    }
    if (culprit < 0) return;
    backend = std::move(abortable_);
    abortable_ = nullptr;
  }
  absl::Status status = absl::UnavailableError(why);
  set_culprits(&status, {CulpritReason::kSilent, {culprit}});
  backend->abort(status);
}

absl::Status ElasticGroup::seal(int64_t generation, const std::vector<int64_t>& previous) {
  kill_point("form/leading", rank_, generation);  // rank_: in the generation before
  const std::string join_key = keys::joined(generation);
  auto joined_now = [&]() -> absl::StatusOr<std::vector<int64_t>> {
    absl::StatusOr<bool> any = store_->check({join_key});
    if (!any.ok()) return any.status();
    if (!*any) return std::vector<int64_t>{};
    absl::StatusOr<std::string> text = store_->get_string(join_key);
    if (!text.ok()) return text.status();
    std::vector<int64_t> ids = parse_ids(*text);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  };
  // Who is expected: the previous members and the processes waiting to join.
  absl::StatusOr<int64_t> pending = store_->add(keys::kPendingCount, 0);
  if (!pending.ok()) return store_error(pending.status(), "forming a generation");
  std::vector<int64_t> expected = previous;
  for (int64_t k = admitted_; k < *pending; ++k) {
    absl::StatusOr<std::string> id = store_->get_string(keys::pending(k), std::chrono::seconds(10));
    if (!id.ok()) continue;  // it died between counting itself and naming itself
    int64_t v = 0;
    if (absl::SimpleAtoi(*id, &v) && !contains(expected, v)) expected.push_back(v);
  }
  const Clock::time_point until = Clock::now() + options_.join_timeout;
  std::vector<int64_t> joined;
  std::set<int64_t> gone;
  for (;;) {
    absl::StatusOr<std::vector<int64_t>> j = joined_now();
    if (!j.ok()) return store_error(j.status(), "forming a generation");
    joined = *j;
    if (generation == 0) {
      if (static_cast<int>(joined.size()) >= options_.expected_size) break;
    } else {
      std::vector<int64_t> unresolved;
      for (int64_t m : minus(expected, joined))
        if (!gone.count(m)) unresolved.push_back(m);
      if (!unresolved.empty()) {
        if (absl::Status s = watch_.refresh(*store_, unresolved); !s.ok())
          return store_error(s, "reading heartbeats");
        for (int64_t m : unresolved)
          if (member_gone(m)) gone.insert(m);
      }
      if (std::all_of(unresolved.begin(), unresolved.end(),
                      [&](int64_t m) { return gone.count(m) > 0; }))
        break;
    }
    if (Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // One that came and then died (its launcher saw it end) is left out.
  joined.erase(std::remove_if(joined.begin(), joined.end(),
                              [&](int64_t m) { return m != id_ && member_gone(m); }),
               joined.end());
  std::string record;
  if (static_cast<int>(joined.size()) < options_.min_size) {
    record = absl::StrCat("END|", joined.size(), " live rank", joined.size() == 1 ? "" : "s",
                          " (members ", join_ids(joined), ") for generation ", generation,
                          ", below the minimum of ", options_.min_size,
                          generation == 0 ? " within the join timeout" : "",
                          ": ending the job");
    if (absl::Status s = store_->set(keys::kFinished, "below minimum"); !s.ok())
      return store_error(s, "ending the job");
  } else {
    record = absl::StrCat(join_ids(joined), "|", *pending, "|", join_ids(previous));
  }
  if (absl::Status s = store_->set(keys::members(generation), record); !s.ok())
    return store_error(s, "publishing a generation");
  if (!absl::StartsWith(record, "END")) {
    if (absl::Status s = store_->set(keys::kGeneration, absl::StrCat(generation)); !s.ok())
      return store_error(s, "publishing a generation");
  }
  return absl::OkStatus();
}

absl::StatusOr<MembershipChange> ElasticGroup::form(int64_t generation,
                                                    const std::vector<int64_t>& previous_members,
                                                    Clock::time_point started, bool newcomer) {
  constexpr int kMaxFailedBuilds = 8;
  int failed_builds = 0;
  std::vector<int64_t> current_previous = previous_members;
  // Joined generations that did not start, or that started and committed
  // no step (the state may not have reached them: a member died while it
  // was sent): they are sent it again.
  std::vector<int64_t> carried_joined = unconfirmed_joined_;
  const std::vector<int64_t>& previous = current_previous;
  for (;;) {
    if (absl::Status s = store_->append(keys::joined(generation), to_bytes(absl::StrCat(id_, ",")));
        !s.ok())
      return store_error(s, "joining a generation");
    // Only a member of the generation before (or, for the first, anyone)
    // leads: a newcomer knows nothing of who is expected.
    std::string leader = "?";
    if (!newcomer || generation == 0) {
      absl::StatusOr<Bytes> l =
          store_->compare_set(keys::leader(generation), {}, to_bytes(absl::StrCat(id_)));
      if (!l.ok()) return store_error(l.status(), "electing a leader");
      leader = to_string(*l);
      if (leader == absl::StrCat(id_)) {
        if (absl::Status s = seal(generation, previous); !s.ok()) return s;
      }
    }
    // The first generation waits up to join_timeout; later ones are sealed
    // once every expected member arrived or stopped beating. A newcomer may
    // wait longer (until the next step boundary), unless the job ends.
    const Clock::time_point until =
        Clock::now() + options_.join_timeout + std::chrono::seconds(10);
    absl::StatusOr<std::string> text = absl::DeadlineExceededError("");
    for (;;) {
      text = store_->get_string(keys::members(generation), std::chrono::milliseconds(200));
      if (text.ok() || !is_timeout(text.status())) break;
      if (Clock::now() >= until) break;
      // A leader that died while forming the generation is replaced: the
      // first to swap itself in decides instead.
      int64_t leader_id = -1;
      if ((!newcomer || generation == 0) && absl::SimpleAtoi(leader, &leader_id) &&
          leader_id != id_ && member_gone(leader_id)) {
        absl::StatusOr<Bytes> l = store_->compare_set(keys::leader(generation), to_bytes(leader),
                                                      to_bytes(absl::StrCat(id_)));
        if (!l.ok()) return store_error(l.status(), "replacing a leader");
        leader = to_string(*l);
        if (leader == absl::StrCat(id_)) {
          if (absl::Status s = seal(generation, previous); !s.ok()) return s;
        }
        continue;
      }
      absl::StatusOr<bool> finished = store_->check({keys::kFinished});
      if (!finished.ok()) return store_error(finished.status(), "waiting for a generation");
      if (*finished) {
        return absl::FailedPreconditionError(absl::StrCat(
            "elastic: the job ended before generation ", generation, " formed with this process"));
      }
    }
    if (!text.ok()) {
      if (is_timeout(text.status())) {
        return absl::DeadlineExceededError(absl::StrCat(
            "elastic: generation ", generation, " did not form within ",
            options_.join_timeout.count(), " ms (its leader, member ", leader,
            ", may have died while forming it)"));
      }
      return store_error(text.status(), "waiting for a generation");
    }
    Record r = parse_record(*text);
    if (r.end) return absl::FailedPreconditionError(absl::StrCat("elastic: ", r.why));
    if (!contains(r.members, id_)) {
      if (!newcomer) {
        return absl::FailedPreconditionError(absl::StrCat(
            "elastic: this process (member ", id_, ") was left out of generation ", generation,
            " (members ", join_ids(r.members),
            "): it stopped answering (stopped or too slow) while the others re-formed; it is "
            "refused rather than merged into a generation it does not belong to"));
      }
      // A newcomer that came too late for this generation waits for the next.
      if (absl::Status s = announce_newcomer(); !s.ok()) return s;
      ++generation;
      continue;
    }
    generation_ = generation;
    admitted_ = r.admitted;
    const std::vector<int64_t> before = r.previous;
    members_ = r.members;
    {
      std::lock_guard<std::mutex> lock(watched_mu_);
      watched_ = members_;
      abortable_ = nullptr;  // the generation before is left behind
    }
    rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), id_) - members_.begin());
    kill_point("form/member", rank_, generation);
    MembershipChange c;
    c.generation = generation;
    c.rank = rank_;
    c.size = size();
    c.members = members_;
    c.left = minus(before, members_);
    // Those admitted into a generation that never started still need the
    // state: they count as joining this one.
    c.joined = minus(members_, before);
    for (int64_t m : carried_joined)
      if (contains(members_, m) && !contains(c.joined, m)) c.joined.push_back(m);
    std::sort(c.joined.begin(), c.joined.end());
    c.this_process_joined = contains(c.joined, id_);
    if (generation > 0 && !c.joined.empty() && contains(c.joined, members_[0])) {
      return absl::FailedPreconditionError(absl::StrCat(
          "elastic: generation ", generation, " has no member of generation ", generation - 1,
          " (members ", join_ids(members_), "): no live rank holds the training state"));
    }
    // A fresh group: its own store prefix, so new shared-memory segments
    // and TCP pairs, and the host topology found again.
    auto pg_store = std::make_shared<PrefixStore>(keys::group_prefix(generation), store_);
    absl::StatusOr<std::shared_ptr<Backend>> backend =
        create_backend(options_.backend, pg_store, rank_, size(), options_.connect_timeout);
    if (!backend.ok()) {
      // A member died while the group connected: the next generation
      // forms from the members of this one that are left.
      if (++failed_builds > kMaxFailedBuilds) {
        return absl::Status(backend.status().code(),
                            absl::StrCat("elastic: building generation ", generation,
                                         "'s group (", options_.backend, ", rank ", rank_,
                                         " of ", size(), "): ", backend.status().message()));
      }
      // (The first generation's members all start from the same state.)
      if (generation > 0) {
        for (int64_t m : c.joined)
          if (!contains(carried_joined, m)) carried_joined.push_back(m);
      }
      current_previous = members_;
      newcomer = false;  // a member now, of the generation that failed
      ++generation;
      continue;
    }
    kill_point("form/connected", rank_, generation);
    {
      std::lock_guard<std::mutex> lock(watched_mu_);
      abortable_ = *backend;
      abortable_generation_ = generation;
    }
    retire(std::move(pg_));
    pg_ = std::make_shared<ProcessGroup>(*std::move(backend), pg_store, options_.timeout);
    c.seconds = seconds_since(started);
    last_change_ = c;
    unconfirmed_joined_ = generation > 0 ? c.joined : std::vector<int64_t>{};
    return c;
  }
}

absl::StatusOr<MembershipChange> ElasticGroup::reform(const absl::Status& why) {
  (void)why;
  const Clock::time_point started = Clock::now();
  const std::vector<int64_t> previous = members_;
  return form(generation_ + 1, previous, started, /*newcomer=*/false);
}

absl::StatusOr<CommitDecision> ElasticGroup::should_commit(int64_t step,
                                                           const absl::Status& local) {
  const std::string decision_key = keys::decision(generation_, step);
  auto propose = [&](const std::string& d) -> absl::StatusOr<std::string> {
    absl::StatusOr<Bytes> v = store_->compare_set(decision_key, {}, to_bytes(d));
    if (!v.ok()) return store_error(v.status(), "voting on a step");
    return to_string(*v);
  };
  kill_point("vote/enter", rank_, step);
  std::optional<std::string> decided;
  if (!local.ok()) {
    absl::StatusOr<std::string> d = propose(absl::StrCat("abort rank ", rank_, ": ", local.message()));
    if (!d.ok()) return d.status();
    decided = *d;
  } else {
    absl::StatusOr<int64_t> n = store_->add(keys::votes(generation_, step), 1);
    if (!n.ok()) return store_error(n.status(), "voting on a step");
    if (*n == size()) {
      absl::StatusOr<int64_t> pending = store_->add(keys::kPendingCount, 0);
      if (!pending.ok()) return store_error(pending.status(), "voting on a step");
      absl::StatusOr<std::string> d = propose(*pending > admitted_ ? "commit admit" : "commit");
      if (!d.ok()) return d.status();
      decided = *d;
    }
  }
  kill_point("vote/cast", rank_, step);
  const Clock::time_point until = Clock::now() + options_.timeout;
  while (!decided.has_value()) {
    // Short waits: a member that voted no and died is seen between them.
    absl::StatusOr<std::string> v = store_->get_string(
        decision_key, std::min<std::chrono::milliseconds>(options_.heartbeat_interval,
                                                          std::chrono::milliseconds(50)));
    if (v.ok()) {
      decided = *v;
      break;
    }
    if (!is_timeout(v.status())) return store_error(v.status(), "waiting for a step's vote");
    // Someone has not voted yet: is it gone? (The heartbeat thread keeps
    // the watch of the members up to date.)
    std::string why;
    for (size_t r = 0; r < members_.size(); ++r) {
      if (members_[r] != id_ && member_gone(members_[r])) {
        why = absl::StrCat("abort rank ", r, " (member ", members_[r],
                           ") is gone (its launcher saw it end, or no heartbeat for ",
                           watch_.dead_after().count(), " ms)");
        break;
      }
    }
    if (why.empty() && Clock::now() >= until) {
      why = absl::StrCat("abort not every rank voted within ", options_.timeout.count(), " ms");
    }
    if (!why.empty()) {
      absl::StatusOr<std::string> d = propose(why);
      if (!d.ok()) return d.status();
      decided = *d;
    }
  }
  if (rank_ == 0 && step >= 2) {  // the vote of two steps back is read by everyone by now
    (void)store_->delete_key(keys::votes(generation_, step - 2));
    (void)store_->delete_key(keys::decision(generation_, step - 2));
  }
  kill_point("vote/decided", rank_, step);
  CommitDecision d;
  d.commit = absl::StartsWith(*decided, "commit");
  // Every member took part in a committed step: the newcomers had the state.
  if (d.commit) unconfirmed_joined_.clear();
  d.admit = *decided == "commit admit";
  if (!d.commit) d.why = decided->substr(std::min<size_t>(decided->size(), 6));
  return d;
}

void ElasticGroup::finish() {
  (void)store_->set(keys::kFinished, "done");
  heartbeat_.reset();
}

std::string this_process() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, ":", getpid());
}

absl::Status mark_gone(Store& job_store, const std::string& host, int pid) {
  return job_store.set(keys::gone(absl::StrCat(host, ":", pid)), "ended");
}

}  // namespace ddpx::elastic
