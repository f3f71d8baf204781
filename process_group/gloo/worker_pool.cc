#include "process_group/gloo/worker_pool.h"

#include <algorithm>
#include <atomic>


namespace ddpx {
namespace {

// The lanes whose tasks the calling thread is running, innermost first (a
// task may wait for another pool's op and run it inline).
struct RunningTask {
  const void* lane;
  const RunningTask* outer;
};
thread_local const RunningTask* running_tasks = nullptr;

}  // namespace

// A worker's queue and whether some thread (the worker or a waiter) is
// running one of its tasks. Shared with tickets, so a Work outliving the
// pool can still ask (and be told no).
struct WorkerPool::Lane {
  // Whether some thread runs (or has claimed) the lane, whether it is
  // stopping, and how many tasks are queued, in one word: claiming an idle,
  // empty lane and releasing that claim are then one atomic instruction
  // each, without the mutex (the small op on its issuing thread does both
  // per op). Everything else changes it under `mu` only, so while a task is
  // queued or the lane stops, the word changes under `mu` alone.
  static constexpr uint32_t kBusy = 1, kStopping = 2, kQueued = 4;
  std::atomic<uint32_t> state{0};

  std::mutex mu;
  std::condition_variable changed;  // queue, busy, stopping or lazy changed
  std::deque<std::shared_ptr<Ticket>> queue;
  // The adaptive wake-up (header): tasks run by their waiters in a row,
  // whether submit skips waking the worker, and the lazy worker's empty
  // looks in a row. Written under `mu`; `lazy` is also read without it by
  // the claim's release (a stale value costs that release its fast path,
  // or one count of a heuristic).
  int inline_runs = 0;
  std::atomic<bool> lazy{false};
  int idle_polls = 0;
  std::chrono::microseconds poll = kLazyPollMin;  // the next look's interval

  // Acquire: a thread that sees the lane idle sees what its last runner did.
  bool busy() const { return (state.load(std::memory_order_acquire) & kBusy) != 0; }
  bool stopping() const { return (state.load(std::memory_order_relaxed) & kStopping) != 0; }
  bool is_lazy() const { return lazy.load(std::memory_order_relaxed); }
  void set_lazy(bool on) { lazy.store(on, std::memory_order_relaxed); }
  // Under `mu`: takes the queue's head and marks the lane busy (it was idle
  // with a task queued, so no claim races with this).
  std::shared_ptr<Ticket> take_front() {
    std::shared_ptr<Ticket> t = std::move(queue.front());
    queue.pop_front();
    state.fetch_add(kBusy - kQueued, std::memory_order_acquire);
    return t;
  }
  // Under `mu`: queues `t`; returns whether the lane was busy.
  bool put(std::shared_ptr<Ticket> t, bool first) {
    if (first) {
      queue.push_front(std::move(t));
    } else {
      queue.push_back(std::move(t));
    }
    return (state.fetch_add(kQueued, std::memory_order_acq_rel) & kBusy) != 0;
  }
  // Under `mu` (or by the claim's fast release): the runner is done.
  void set_idle() { state.fetch_and(~kBusy, std::memory_order_release); }

  void become_eager() {
    set_lazy(false);
    inline_runs = 0;
    idle_polls = 0;
    poll = kLazyPollMin;
  }
};

class WorkerPool::Ticket {
 public:
  Ticket(std::shared_ptr<Lane> lane, Task task)
      : lane_(std::move(lane)), task_(std::move(task)) {}

 private:
  friend class WorkerPool;
  std::shared_ptr<Lane> lane_;
  Task task_;  // guarded by lane_->mu; emptied when taken
  std::chrono::steady_clock::time_point queued_at;  // guarded by lane_->mu
};

bool WorkerPool::running_here(const Lane* lane) {
  for (const RunningTask* t = running_tasks; t != nullptr; t = t->outer) {
    if (t->lane == lane) return true;
  }
  return false;
}

void WorkerPool::run_and_release(Lane& lane, Task task) {
  {
    const RunningTask frame{&lane, running_tasks};
    running_tasks = &frame;
    task.run();
    running_tasks = frame.outer;
  }
  task = Task{};  // the op's captures go before the lane takes the next one
  std::lock_guard<std::mutex> lock(lane.mu);
  lane.set_idle();
  // Only the worker (for a queued task) and shutdown() wait for this; a
  // waiter's inline op with nothing queued behind it wakes nobody, which on
  // a 2-core machine is CPU the peer process needs for the same op.
  if (!lane.queue.empty() || lane.stopping()) lane.changed.notify_all();
}

WorkerPool::WorkerPool(int num_workers) {
  for (int i = 0; i < num_workers; ++i) lanes_.push_back(std::make_shared<Lane>());
  for (const std::shared_ptr<Lane>& lane : lanes_) {
    // The thread owns its lane too: it may outlive the pool (shutdown()).
    threads_.emplace_back([lane] { loop(lane.get()); });
  }
}

WorkerPool::~WorkerPool() { shutdown(); }

std::shared_ptr<WorkerPool::Ticket> WorkerPool::submit(int index, Task task) {
  const std::shared_ptr<Lane>& lane = lanes_[index];
  auto ticket = std::make_shared<Ticket>(lane, std::move(task));
  {
    std::lock_guard<std::mutex> lock(lane->mu);
    if (!lane->stopping()) {
      ticket->queued_at = std::chrono::steady_clock::now();
      const bool busy = lane->put(ticket, /*first=*/false);
      // While a task runs (or a claim holds the lane), its release wakes
      // the worker for this one; a lazy worker looks by itself.
      if (!busy && !lane->is_lazy()) lane->changed.notify_all();
      return ticket;
    }
  }
  Task dropped = std::move(ticket->task_);
  if (dropped.cancel) dropped.cancel();
  return ticket;
}

bool WorkerPool::run_here_if_next(const std::shared_ptr<Ticket>& ticket) {
  if (ticket == nullptr) return false;
  Lane& lane = *ticket->lane_;
  Task task;
  {
    std::lock_guard<std::mutex> lock(lane.mu);
    if (lane.stopping() || lane.busy() || lane.queue.empty() ||
        lane.queue.front() != ticket) {
      return false;
    }
    lane.take_front();
    task = std::move(ticket->task_);
    if (!lane.is_lazy() && ++lane.inline_runs >= kLazyAfterInlineRuns) {
      lane.set_lazy(true);
      // A worker asleep without a deadline must start looking by itself.
      lane.changed.notify_all();
    }
  }
  run_and_release(lane, std::move(task));
  return true;
}

bool WorkerPool::try_claim(int index) {
  // Idle, nothing queued, not stopping: the whole word is 0.
  uint32_t idle = 0;
  return lanes_[index]->state.compare_exchange_strong(idle, Lane::kBusy, std::memory_order_acquire,
                                                      std::memory_order_relaxed);
}

std::shared_ptr<WorkerPool::Ticket> WorkerPool::release_claim(int index, Task rest) {
  const std::shared_ptr<Lane>& lane = lanes_[index];
  std::shared_ptr<Ticket> ticket;
  const bool has_rest = static_cast<bool>(rest.run);
  // Nothing was queued meanwhile, the pool is not stopping and the worker is
  // lazy already: nobody is to be woken and nothing counted, so the claim
  // ends without the mutex.
  uint32_t claimed = Lane::kBusy;
  if (!has_rest && lane->is_lazy() &&
      lane->state.compare_exchange_strong(claimed, 0, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    return nullptr;
  }
  if (has_rest) ticket = std::make_shared<Ticket>(lane, std::move(rest));
  {
    std::lock_guard<std::mutex> lock(lane->mu);
    lane->set_idle();
    if (has_rest && !lane->stopping()) {
      ticket->queued_at = std::chrono::steady_clock::now();
      lane->put(ticket, /*first=*/true);
    } else if (!has_rest && !lane->is_lazy() && ++lane->inline_runs >= kLazyAfterInlineRuns) {
      // An op that ran wholly on its caller's thread counts as a waiter's
      // run: the worker turns lazy (and must start looking by itself).
      lane->set_lazy(true);
      lane->changed.notify_all();
    }
    // A lazy worker looks at its queue by itself, leaving the rest of the op
    // to the thread that waits for it for kLazyGrace.
    if (lane->stopping() || (!lane->is_lazy() && !lane->queue.empty())) {
      lane->changed.notify_all();
    }
    if (!has_rest || !lane->stopping()) return ticket;
  }
  Task dropped = std::move(ticket->task_);
  if (dropped.cancel) dropped.cancel();
  return ticket;
}

void WorkerPool::shutdown() {
  for (auto& lane : lanes_) {
    std::deque<std::shared_ptr<Ticket>> dropped;
    {
      std::lock_guard<std::mutex> lock(lane->mu);
      // Stopping first: no claim starts or ends without the mutex from here.
      lane->state.fetch_or(Lane::kStopping, std::memory_order_relaxed);
      dropped.swap(lane->queue);
      lane->state.fetch_sub(static_cast<uint32_t>(dropped.size()) * Lane::kQueued,
                            std::memory_order_relaxed);
      lane->changed.notify_all();
    }
    for (auto& ticket : dropped) {
      Task task;
      {
        std::lock_guard<std::mutex> lock(lane->mu);
        task = std::move(ticket->task_);
      }
      if (task.cancel) task.cancel();
    }
  }
  for (size_t i = 0; i < threads_.size(); ++i) {
    std::thread& t = threads_[i];
    if (!t.joinable()) continue;
    if (t.get_id() == std::this_thread::get_id()) {
      // Inside one of our tasks, on its worker: that task goes on after
      // this returns, and the thread ends after it, on its own. A thread
      // cannot join itself, and nobody else may be left to join it: the
      // process can be exiting while the task ends (a callback that held
      // the group's last reference outlives main's use of it).
      t.detach();
    } else {
      t.join();
    }
  }
  // A waiter may still be running a task it took on its own thread; the
  // backend's contexts must outlive it. The task the caller is inside of
  // (its owner was released there) ends only after this returns.
  for (auto& lane : lanes_) {
    if (running_here(lane.get())) continue;
    std::unique_lock<std::mutex> lock(lane->mu);
    lane->changed.wait(lock, [&] { return !lane->busy(); });
  }
}

void WorkerPool::loop(Lane* lane) {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(lane->mu);
      for (;;) {
        if (lane->stopping()) return;  // shutdown() cancels what is queued
        if (!lane->busy() && !lane->queue.empty()) {
          if (!lane->is_lazy()) break;
          // A lazy worker leaves a fresh task to its waiter for kLazyGrace;
          // one nobody took by then is asynchronous: be eager again.
          const Clock::time_point due = lane->queue.front()->queued_at + kLazyGrace;
          if (Clock::now() >= due) {
            lane->become_eager();
            break;
          }
          lane->changed.wait_until(lock, due);
        } else if (lane->is_lazy()) {
          // Submit wakes nobody now: look again later, less often the longer
          // nothing comes, and go back to sleeping until woken after
          // kLazyIdlePolls empty looks.
          if (!lane->busy() && ++lane->idle_polls >= kLazyIdlePolls) {
            lane->become_eager();
            continue;
          }
          lane->changed.wait_for(lock, lane->poll);
          lane->poll = std::min(lane->poll * 2, kLazyPollMax);
        } else {
          lane->changed.wait(lock);
        }
      }
      std::shared_ptr<Ticket> ticket = lane->take_front();
      lane->inline_runs = 0;  // the worker ran one: not a waiter's streak
      task = std::move(ticket->task_);
    }
    run_and_release(*lane, std::move(task));
  }
}

}  // namespace ddpx
