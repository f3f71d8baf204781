#include "process_group/tracing/trace_service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "process_group/tracing/trace_dump.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

// Written by the SIGUSR1 handler: async-signal-safe state only.
std::atomic<bool> g_sigusr1{false};
std::atomic<int> g_wake_fd{-1};

void on_sigusr1(int) {
  const int saved = errno;
  g_sigusr1.store(true);
  const int fd = g_wake_fd.load();
  if (fd >= 0) {
    const char c = 'u';
    (void)!write(fd, &c, 1);
  }
  errno = saved;
}

// "<request> <state>" -> request, state.
bool parse_state(const std::string& value, int64_t* request, std::string* state) {
  const size_t space = value.find(' ');
  if (space == std::string::npos) return false;
  if (!absl::SimpleAtoi(value.substr(0, space), request)) return false;
  *state = value.substr(space + 1);
  return true;
}

}  // namespace

struct TraceService::Impl {
  std::mutex mu;

  // The job, while attached.
  std::shared_ptr<Store> world;       // the store init_process_group used
  std::shared_ptr<Store> connection;  // a clone of it for the store thread
  int rank = -1;
  int world_size = -1;
  std::string dir;
  bool dir_set = false;  // by set_trace_dir (not overridden by the environment)
  bool told_no_dir = false;
  bool handler_installed = false;

  // The dump thread.
  bool dump_thread = false;
  int wake_write = -1;
  int wake_read = -1;
  struct DumpJob {
    uint64_t id;
    std::string reason;
    bool wanted;  // someone waits for dump_results[id]
  };
  std::deque<DumpJob> dump_jobs;
  uint64_t next_dump = 1;
  bool dump_busy = false;
  std::map<uint64_t, absl::Status> dump_results;
  std::condition_variable dump_cv;

  // The store thread.
  bool store_thread = false;
  std::condition_variable store_cv;
  struct Exchange {
    int32_t group = -1;
    int group_rank = -1;
    Culprits culprits;
    Clock::time_point deadline;
    bool done = false;
    std::vector<std::string> lines;
  };
  std::deque<std::shared_ptr<Exchange>> exchanges;
  std::condition_variable exchange_cv;
  std::set<int64_t> own_requests;
  // The highest request number this rank has seen polling.
  int64_t last_seen = 0;
  // The request of this rank's previous failure: peer states published for
  // it or earlier are stale for the next one (in most jobs the first failure
  // is the last; the ranks' answers to one failure all carry request numbers
  // of that failure's burst of requests).
  int64_t previous_failure = 0;

  void start_threads_locked();
  void dump_loop();
  void store_loop();
  uint64_t queue_dump_locked(const std::string& reason, bool wanted);
  absl::Status write_dump(const std::string& reason);
  void run_exchange(Store& world_store, Exchange& job);
  void poll_requests(Store& world_store);
  void publish_states(int64_t request);
};

TraceService& TraceService::get() {
  static TraceService* service = [] {
    auto* s = new TraceService();
    FlightRecorder::get().set_failure_listener(s);
    return s;
  }();
  return *service;
}

TraceService::TraceService() : impl_(new Impl) {}

void TraceService::attach_world(std::shared_ptr<Store> store, int rank, int world_size) {
  // A connection of its own for the store thread, made now while the
  // store surely answers; without one it shares the caller's.
  std::shared_ptr<Store> connection;
  // Requests made before this process joined are not for it.
  int64_t requests_so_far = 0;
  if (store != nullptr) {
    absl::StatusOr<std::unique_ptr<Store>> clone = store->clone();
    if (clone.ok()) connection = std::move(*clone);
    absl::StatusOr<bool> exists = store->check({kRequestKey});
    if (exists.ok() && *exists) {
      absl::StatusOr<std::string> v = store->get_string(kRequestKey, std::chrono::seconds(5));
      if (v.ok()) absl::SimpleAtoi(*v, &requests_so_far);
    }
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->last_seen = requests_so_far;
  impl_->world = std::move(store);
  impl_->connection = std::move(connection);
  impl_->rank = rank;
  impl_->world_size = world_size;
  if (!impl_->dir_set) {
    const char* env = std::getenv("DDPX_TRACE_DIR");
    impl_->dir = env == nullptr ? "" : env;
  }
  impl_->start_threads_locked();
  if (!impl_->dir.empty() && !impl_->handler_installed) {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
        !(current.sa_flags & SA_SIGINFO)) {
      struct sigaction sa {};
      sa.sa_handler = on_sigusr1;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      impl_->handler_installed = sigaction(SIGUSR1, &sa, nullptr) == 0;
    }
  }
}

void TraceService::detach_world() {
  std::shared_ptr<Store> world, connection;  // released after the lock
  std::lock_guard<std::mutex> lock(impl_->mu);
  world = std::move(impl_->world);
  connection = std::move(impl_->connection);
}

std::string TraceService::trace_dir() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->dir;
}

void TraceService::set_trace_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->dir = dir;
  impl_->dir_set = true;
}

std::string TraceService::dump_path() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return absl::StrCat(impl_->dir, "/",
                      impl_->rank >= 0 ? absl::StrCat("rank", impl_->rank)
                                       : absl::StrCat("pid", getpid()),
                      ".jsonl");
}

void TraceService::Impl::start_threads_locked() {
  if (!dump_thread) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      wake_read = fds[0];
      wake_write = fds[1];
      g_wake_fd.store(wake_write);
    }
    dump_thread = true;
    std::thread([this] { dump_loop(); }).detach();
    // Dumps still being written when main() returns get to finish.
    std::atexit([] {
      Impl* impl = TraceService::get().impl_;
      std::unique_lock<std::mutex> lock(impl->mu);
      impl->dump_cv.wait_for(lock, kDumpWait,
                             [&] { return impl->dump_jobs.empty() && !impl->dump_busy; });
    });
  }
  if (!store_thread) {
    store_thread = true;
    std::thread([this] { store_loop(); }).detach();
  }
}

uint64_t TraceService::Impl::queue_dump_locked(const std::string& reason, bool wanted) {
  const uint64_t id = next_dump++;
  dump_jobs.push_back({id, reason, wanted});
  if (wake_write >= 0) {
    const char c = 'd';
    (void)!write(wake_write, &c, 1);
  }
  return id;
}

absl::Status TraceService::dump(const std::string& reason, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->dir.empty()) {
    return absl::FailedPreconditionError(
        "the flight recorder has nowhere to dump: set DDPX_TRACE_DIR (the trainer's --trace_dir)");
  }
  impl_->start_threads_locked();
  const uint64_t id = impl_->queue_dump_locked(reason, true);
  const bool done = impl_->dump_cv.wait_for(
      lock, wait, [&] { return impl_->dump_results.count(id) != 0; });
  if (!done) {
    // Still written later.
    return absl::DeadlineExceededError(absl::StrCat(
        "the flight recorder's dump was not written within ", wait.count(), " ms"));
  }
  absl::Status s = impl_->dump_results[id];
  impl_->dump_results.erase(id);
  return s;
}

absl::Status TraceService::Impl::write_dump(const std::string& reason) {
  std::string dir_now, path;
  DumpInfo info;
  info.reason = reason;
  {
    std::lock_guard<std::mutex> lock(mu);
    dir_now = dir;
    info.rank = rank;
    info.world_size = world_size;
  }
  if (dir_now.empty()) return absl::FailedPreconditionError("no trace dir");
  path = absl::StrCat(dir_now, "/",
                      info.rank >= 0 ? absl::StrCat("rank", info.rank)
                                     : absl::StrCat("pid", getpid()),
                      ".jsonl");
  absl::Status s;
  try {
    if (mkdir(dir_now.c_str(), 0755) != 0 && errno != EEXIST) {
      s = absl::UnavailableError(absl::StrCat("cannot create ", dir_now, ": ", strerror(errno)));
    } else {
      s = write_file_atomically(path, format_dump(FlightRecorder::get().snapshot(), info));
    }
  } catch (const std::exception& e) {  // std::bad_alloc: a dump is never worth a crash
    s = absl::ResourceExhaustedError(absl::StrCat("cannot build the dump: ", e.what()));
  }
  if (s.ok()) {
    fprintf(stderr, "ddpx: flight recorder: rank %d wrote %s (%s)\n", info.rank, path.c_str(),
            reason.c_str());
  } else {
    fprintf(stderr, "ddpx: flight recorder: rank %d could not write its dump (%s): %s\n",
            info.rank, reason.c_str(), std::string(s.message()).c_str());
  }
  return s;
}

void TraceService::Impl::dump_loop() {
  for (;;) {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu);
      fd = wake_read;
    }
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 1000);
      char buf[64];
      while (read(fd, buf, sizeof(buf)) > 0) {
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::vector<DumpJob> jobs;
    const bool signalled = g_sigusr1.exchange(false);
    {
      std::lock_guard<std::mutex> lock(mu);
      jobs.assign(dump_jobs.begin(), dump_jobs.end());
      dump_jobs.clear();
      dump_busy = signalled || !jobs.empty();
    }
    if (!signalled && jobs.empty()) continue;
    // One dump answers every request that arrived meanwhile.
    std::string reason = signalled ? "SIGUSR1" : jobs.front().reason;
    if (jobs.size() + (signalled ? 1 : 0) > 1) {
      absl::StrAppend(&reason, " (and ", jobs.size() + (signalled ? 1 : 0) - 1, " more)");
    }
    const absl::Status s = write_dump(reason);
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const DumpJob& job : jobs) {
        if (job.wanted) dump_results[job.id] = s;
      }
      // Results whose waiters gave up.
      while (dump_results.size() > 64) dump_results.erase(dump_results.begin());
      dump_busy = false;
    }
    dump_cv.notify_all();
  }
}

void TraceService::Impl::store_loop() {
  for (;;) {
    std::shared_ptr<Exchange> job;
    std::shared_ptr<Store> store;
    {
      std::unique_lock<std::mutex> lock(mu);
      store_cv.wait_for(lock, kPollEvery, [&] { return !exchanges.empty(); });
      if (!exchanges.empty()) {
        job = exchanges.front();
        exchanges.pop_front();
      }
      store = connection != nullptr ? connection : world;
    }
    if (store == nullptr) {
      if (job != nullptr) {
        std::lock_guard<std::mutex> lock(mu);
        job->done = true;
        exchange_cv.notify_all();
      }
      continue;
    }
    if (job != nullptr) {
      run_exchange(*store, *job);
      std::lock_guard<std::mutex> lock(mu);
      job->done = true;
      exchange_cv.notify_all();
    } else {
      poll_requests(*store);
    }
  }
}

void TraceService::Impl::publish_states(int64_t request) {
  FlightRecorder& rec = FlightRecorder::get();
  for (const TraceGroupInfo& g : rec.groups()) {
    if (!g.alive) continue;
    std::shared_ptr<Store> s = rec.group_store(g.index);
    if (s == nullptr) continue;
    s->set(absl::StrCat(kStatePrefix, g.rank),
           absl::StrCat(request, " ", rec.describe_state(g.index)))
        .IgnoreError();
  }
}

void TraceService::Impl::poll_requests(Store& store) {
  absl::StatusOr<bool> exists = store.check({kRequestKey});
  if (!exists.ok()) return;  // the store went away: quiet until detached
  int64_t n = 0;
  if (*exists) {
    absl::StatusOr<std::string> value = store.get_string(kRequestKey, std::chrono::seconds(1));
    if (!value.ok() || !absl::SimpleAtoi(*value, &n)) return;
  }
  bool others = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (n <= last_seen) return;
    for (int64_t k = last_seen + 1; k <= n; ++k) others |= own_requests.count(k) == 0;
    last_seen = n;
    // This rank's own failure asked: it dumps by itself.
    if (others) {
      queue_dump_locked(absl::StrCat("request #", n, " through the store (a peer's op failed)"),
                        false);
    }
  }
  if (others) publish_states(n);
}

void TraceService::Impl::run_exchange(Store& store, Exchange& job) {
  FlightRecorder& rec = FlightRecorder::get();
  int64_t request = -1;
  absl::StatusOr<int64_t> added = store.add(kRequestKey, 1);
  if (!added.ok()) {
    job.lines.push_back("peer states unknown: the store is unreachable");
    return;
  }
  request = *added;
  int64_t stale_up_to;
  {
    std::lock_guard<std::mutex> lock(mu);
    own_requests.insert(request);
    stale_up_to = previous_failure;
    previous_failure = request;
  }
  std::shared_ptr<Store> group_store = rec.group_store(job.group);
  if (group_store == nullptr) return;
  group_store->set(absl::StrCat(kStatePrefix, job.group_rank),
                   absl::StrCat(request, " ", rec.describe_state(job.group)))
      .IgnoreError();
  std::map<int, std::string> answers;
  std::vector<int> pending;
  for (int peer : job.culprits.ranks) {
    if (job.culprits.reason == CulpritReason::kExited) {
      answers[peer] = "exited";
    } else if (peer != job.group_rank) {
      pending.push_back(peer);
    }
  }
  bool store_gone = false;
  while (!pending.empty()) {
    std::vector<int> still;
    for (int peer : pending) {
      const std::string key = absl::StrCat(kStatePrefix, peer);
      absl::StatusOr<bool> has = group_store->check({key});
      store_gone |= !has.ok();
      if (has.ok() && *has) {
        absl::StatusOr<std::string> v = group_store->get_string(key, std::chrono::seconds(1));
        int64_t their_request = 0;
        std::string state;
        // Published for this failure or a peer's at about the same time.
        if (v.ok() && parse_state(*v, &their_request, &state) && their_request > stale_up_to) {
          answers[peer] = state;
          continue;
        }
      }
      still.push_back(peer);
    }
    pending.swap(still);
    if (pending.empty() || store_gone || Clock::now() >= job.deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int peer : pending) {
    answers[peer] = store_gone ? "unknown (the store stopped answering)"
                               : absl::StrCat("no answer within ", format_timeout(kPeerStateWait),
                                              " (stopped, hung or dead)");
  }
  for (const auto& [peer, state] : answers) {
    job.lines.push_back(absl::StrCat("rank ", peer, ": ", state));
  }
}

std::vector<std::string> TraceService::peer_states(const TraceGroupInfo& group,
                                                   const Culprits& culprits) {
  auto job = std::make_shared<Impl::Exchange>();
  job->group = group.index;
  job->group_rank = group.rank;
  job->culprits = culprits;
  job->deadline = Clock::now() + kPeerStateWait;
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->world == nullptr || !impl_->store_thread) return {};
  impl_->exchanges.push_back(job);
  impl_->store_cv.notify_all();
  const auto limit = kPeerStateWait + std::chrono::milliseconds(500);
  if (!impl_->exchange_cv.wait_for(lock, limit, [&] { return job->done; })) {
    return {absl::StrCat("peer states unknown: the store did not answer within ",
                         format_timeout(limit))};
  }
  return job->lines;
}

void TraceService::on_failure(const TraceError& error) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->dir.empty()) {
      if (!impl_->told_no_dir) {
        impl_->told_no_dir = true;
        fprintf(stderr,
                "ddpx: flight recorder: set DDPX_TRACE_DIR (the trainer's --trace_dir) to keep "
                "a dump of the last %zu ops of every rank when an op fails\n",
                FlightRecorder::get().capacity());
      }
      return;
    }
  }
  const TraceGroupInfo g = FlightRecorder::get().group_info(error.group);
  dump(absl::StrCat(op_type_name(error.op), " #", error.seq, " of group ", g.name, " failed"),
       kDumpWait)
      .IgnoreError();
}

}  // namespace ddpx
