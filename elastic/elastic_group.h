// Elastic data-parallel membership: the process group of a job whose ranks
// may die, stop or arrive while it trains (docs/elastic.md).
//
//   ddpx::elastic::ElasticOptions o;
//   o.store = store;                 // served outside the training ranks
//   o.expected_size = 4;             // the first generation waits for 4
//   o.min_size = 2;
//   auto group = ddpx::elastic::ElasticGroup::join(o).value();
//   for (;;) {
//     ... forward, backward, allreduce on group->pg() ...
//     auto d = group->should_commit(step, sync_status);   // every live rank
//     if (d.ok() && d->commit) optimizer.step();          // or none does
//     if (!d.ok() || !d->commit || d->admit) group->reform(why);  // g + 1
//   }
//
// Membership goes by generation. Each generation is a fresh ProcessGroup
// under its own store prefix (elastic/.../gen/<g>/pg), so a new one has new
// shared-memory segments, new TCP pairs and its host topology found again.
// Ranks are the members' ids in ascending order: survivors keep their
// order, and every process admitted later has a larger id than any member
// it joins, so rank 0 always holds the training state a newcomer needs.
//
// The store must outlive every training rank: it is served by the launcher
// (or a store process of its own), never by a rank, so losing rank 0 is
// like losing any other rank. Losing the store ends the job with an error
// naming it.
#ifndef DDPX_ELASTIC_ELASTIC_GROUP_H_
#define DDPX_ELASTIC_ELASTIC_GROUP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "elastic/heartbeat.h"
#include "process_group/front_end/process_group.h"
#include "store/store.h"

namespace ddpx::elastic {

struct ElasticOptions {
  // The job's store (a client of a server that is not a training rank),
  // already prefixed for this job; the group's keys go under "elastic/".
  std::shared_ptr<Store> store;
  std::string backend = "gloo";
  // The first generation waits (up to join_timeout) for this many processes.
  int expected_size = 1;
  // Below this many live ranks the job ends (FailedPrecondition naming it).
  int min_size = 1;
  // The timeout of each generation's ops (a stopped peer's op fails after
  // it) and of the commit vote.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // How long a generation's backend may take to connect.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds heartbeat_interval{500};
  // A member whose beat has not moved for this many intervals is dead.
  int heartbeat_misses = 4;
  // The first generation, and a newcomer's admission, wait this long.
  std::chrono::milliseconds join_timeout{std::chrono::seconds(120)};
};

// What changed when a generation formed.
struct MembershipChange {
  int64_t generation = 0;
  int rank = 0;
  int size = 0;
  std::vector<int64_t> members;  // ids, in rank order
  std::vector<int64_t> left;     // members of the previous generation not in this one
  std::vector<int64_t> joined;   // members not in the previous generation
  double seconds = 0;            // from reform() to the new group being usable
  bool this_process_joined = false;  // this process is one of `joined`
};

// The outcome of a step's vote, the same on every live rank.
struct CommitDecision {
  bool commit = false;
  // Processes are waiting to join: after this step every member calls
  // reform() (the step itself commits).
  bool admit = false;
  std::string why;  // for an abort: who proposed it and the cause
};

class ElasticGroup {
 public:
  // Registers this process, beats, and waits until a generation includes
  // it: the first one (expected_size processes, or at least min_size when
  // join_timeout passes), or, once the job is running, the one formed at
  // the next step boundary (this process then needs the state:
  // last_change().this_process_joined).
  static absl::StatusOr<std::unique_ptr<ElasticGroup>> join(const ElasticOptions& options);
  ~ElasticGroup();

  // The current generation's group; replaced by reform().
  const std::shared_ptr<ProcessGroup>& pg() const { return pg_; }
  int64_t generation() const { return generation_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  int64_t member_id() const { return id_; }
  const std::vector<int64_t>& members() const { return members_; }
  const MembershipChange& last_change() const { return last_change_; }
  // Whether this generation has members the previous one lacked: rank 0
  // then sends them the training state (state_transfer.h).
  bool has_newcomers() const { return !last_change_.joined.empty() && generation_ > 0; }

  // The step's vote (torchft's should_commit): `local` is this rank's
  // outcome of the step's communication. Commits only when every member of
  // the generation voted OK; a failed or missing vote (a member that
  // stopped beating, or the timeout) aborts the step on every rank. The
  // decision is one compare-and-set in the store, so no two ranks decide
  // differently. An error means the store itself is gone.
  absl::StatusOr<CommitDecision> should_commit(int64_t step, const absl::Status& local);

  // Forms the next generation from the members that are alive (and the
  // processes waiting to join), after a failed step or an admission.
  // Collective over the survivors. FailedPrecondition when fewer than
  // min_size are left (the job ends), or when this process was left out
  // (it stopped too long: it is refused, never merged into a generation it
  // does not belong to).
  absl::StatusOr<MembershipChange> reform(const absl::Status& why);

  // Marks the job finished (waiting newcomers give up) and stops beating.
  void finish();

  // Releases `object` (an earlier generation's DDP, hook, group) on a
  // thread of its own, joined when this group is destroyed: a backend waits
  // for its ops still running (a stopped peer's, up to their timeout)
  // before it goes, which the next generation need not wait for.
  void retire(std::shared_ptr<void> object);

 private:
  explicit ElasticGroup(const ElasticOptions& options);
  absl::Status register_member();
  // Asks to be admitted at the next step boundary (once).
  absl::Status announce_newcomer();
  // Joins the forming of `generation` (leading it if first), waits for its
  // record and builds its group. A newcomer left out waits for the next.
  absl::StatusOr<MembershipChange> form(int64_t generation, const std::vector<int64_t>& previous,
                                        std::chrono::steady_clock::time_point started,
                                        bool newcomer);
  // The leader's part of forming `generation`: decides the members.
  absl::Status seal(int64_t generation, const std::vector<int64_t>& previous);
  // Stopped beating, or its launcher recorded its end.
  bool member_gone(int64_t member);
  // On the heartbeat's thread, after each look at the members' beats: when
  // a member of the current generation has gone silent, aborts the
  // generation's ops in flight (Backend::abort), so the ranks waiting for
  // it fail now, naming it, instead of at their timeout (once per
  // generation).
  void abort_if_a_member_is_silent();

  const ElasticOptions options_;
  std::shared_ptr<Store> store_;  // under "elastic/"
  int64_t id_ = -1;
  std::unique_ptr<Heartbeat> heartbeat_;
  HeartbeatWatch watch_;
  std::mutex watched_mu_;
  std::vector<int64_t> watched_;  // the members the heartbeat thread looks at
  // The current generation's backend while its ops may be aborted, and its
  // number (under watched_mu_; watched_ then holds its members in rank order).
  std::shared_ptr<Backend> abortable_;
  int64_t abortable_generation_ = -1;
  std::map<int64_t, std::string> whereabouts_;  // member id -> "host:pid"
  int64_t generation_ = -1;
  int64_t admitted_ = 0;  // pending joiners admitted up to (exclusive)
  bool announced_ = false;
  std::vector<int64_t> members_;
  int rank_ = -1;
  std::shared_ptr<ProcessGroup> pg_;
  MembershipChange last_change_;
  // The current generation's newcomers until a step of it commits.
  std::vector<int64_t> unconfirmed_joined_;
  std::vector<std::thread> retiring_;  // retire()
};

// "host:pid" of this process, as members register and launchers report.
std::string this_process();
// What a launcher calls when a process it started (on `host`, as `pid`)
// ended: the leader of the next generation then counts it gone at once
// instead of waiting for its heartbeat to go stale. `job_store` is the
// store the ranks were given in ElasticOptions.
absl::Status mark_gone(Store& job_store, const std::string& host, int pid);

}  // namespace ddpx::elastic

#endif  // DDPX_ELASTIC_ELASTIC_GROUP_H_
