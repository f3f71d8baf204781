// WorkerPool: FIFO per worker, and a waiter running the next task of an idle
// worker on its own thread (run_here_if_next) without breaking that order.
#include "process_group/gloo/worker_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ddpx {
namespace {

// A one-shot gate a task can block on.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(WorkerPoolTest, WaiterRunsAnIdleWorkersNextTaskOnItsOwnThread) {
  WorkerPool pool(1);
  int ran_here = 0;
  // At least 200 tasks, more until one ran here: on a loaded machine the
  // woken worker can preempt the waiter for a long stretch of them.
  for (int i = 0; i < 200 || (ran_here == 0 && i < 20000); ++i) {
    std::atomic<bool> done{false};
    std::thread::id where;
    WorkerPool::Task task;
    task.run = [&] {
      where = std::this_thread::get_id();
      done = true;
    };
    auto ticket = pool.submit(0, std::move(task));
    if (WorkerPool::run_here_if_next(ticket)) {
      // It ran, here, before returning.
      ASSERT_TRUE(done.load());
      ASSERT_EQ(where, std::this_thread::get_id());
      ++ran_here;
    } else {
      while (!done.load()) std::this_thread::yield();
      ASSERT_NE(where, std::this_thread::get_id());
    }
    // A spent ticket never runs again.
    ASSERT_FALSE(WorkerPool::run_here_if_next(ticket));
  }
  // The worker needs a wake-up to take a task; the waiter is already
  // running, so it wins whenever it is not preempted by that wake-up.
  EXPECT_GT(ran_here, 0);
}

// Runs tasks the way "issue, then wait at once" does until `n` in a row
// were taken by their waiter: then the worker is lazy if n >=
// kLazyAfterInlineRuns (while it is eager it is woken at submit and may win
// the race for a task, which restarts its count).
void run_inline(WorkerPool& pool, int n) {
  int in_a_row = 0;
  for (int tries = 0; in_a_row < n; ++tries) {
    ASSERT_LT(tries, 100000) << "the waiter never took " << n << " tasks in a row";
    WorkerPool::Task t;
    t.run = [] {};
    auto ticket = pool.submit(0, std::move(t));
    in_a_row = WorkerPool::run_here_if_next(ticket) ? in_a_row + 1 : 0;
  }
}

// Starts a task nobody waits for and returns how long it took to start, and
// on which thread it ran.
std::pair<std::chrono::microseconds, std::thread::id> start_unwaited(WorkerPool& pool) {
  std::atomic<bool> done{false};
  std::thread::id where;
  std::chrono::steady_clock::time_point started;
  WorkerPool::Task t;
  t.run = [&] {
    started = std::chrono::steady_clock::now();
    where = std::this_thread::get_id();
    done = true;
  };
  const auto submitted = std::chrono::steady_clock::now();
  pool.submit(0, std::move(t));
  while (!done.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return {std::chrono::duration_cast<std::chrono::microseconds>(started - submitted), where};
}

// A lazy worker (submit no longer wakes it) still starts a task nobody waits
// for, by itself and within its polling bound: an asynchronous op progresses
// without a wait. The bound here is loose for loaded CI machines; the
// worker's own is kLazyPollMax + kLazyGrace.
TEST(WorkerPoolTest, LazyWorkerStillStartsATaskNobodyWaitsFor) {
  WorkerPool pool(1);
  for (int round = 0; round < 20; ++round) {
    run_inline(pool, 2 * WorkerPool::kLazyAfterInlineRuns);
    auto [delay, where] = start_unwaited(pool);
    EXPECT_NE(where, std::this_thread::get_id());
    EXPECT_LT(delay, std::chrono::seconds(1)) << "round " << round;
  }
}

// After a lazy worker took an unwaited task it is eager again, and a lazy
// worker left idle goes back to sleeping until woken: in both cases the
// next unwaited task starts (the eager path's wake-up is the one at submit).
TEST(WorkerPoolTest, LazyWorkerTurnsEagerAgainAfterAnUnwaitedTaskOrIdleness) {
  WorkerPool pool(1);
  run_inline(pool, 2 * WorkerPool::kLazyAfterInlineRuns);
  start_unwaited(pool);  // taken by the lazy worker: eager from here
  auto [delay, where] = start_unwaited(pool);
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_LT(delay, std::chrono::seconds(1));

  run_inline(pool, 2 * WorkerPool::kLazyAfterInlineRuns);
  // Longer than kLazyIdlePolls looks at kLazyPollMax at most.
  std::this_thread::sleep_for(WorkerPool::kLazyPollMax * (WorkerPool::kLazyIdlePolls + 2));
  auto [delay2, where2] = start_unwaited(pool);
  EXPECT_NE(where2, std::this_thread::get_id());
  EXPECT_LT(delay2, std::chrono::seconds(1));
}

// A lazy worker leaves a fresh task to its waiter: issue-then-wait runs on
// the waiter's thread every time once the worker is lazy.
TEST(WorkerPoolTest, LazyWorkerLeavesFreshTasksToTheirWaiters) {
  WorkerPool pool(1);
  run_inline(pool, 2 * WorkerPool::kLazyAfterInlineRuns);
  int ran_here = 0;
  constexpr int kTasks = 200;
  for (int i = 0; i < kTasks; ++i) {
    WorkerPool::Task t;
    t.run = [] {};
    if (WorkerPool::run_here_if_next(pool.submit(0, std::move(t)))) ++ran_here;
  }
  // Only a waiter descheduled for longer than kLazyGrace between submit and
  // wait loses its task to the worker.
  EXPECT_GE(ran_here, kTasks * 9 / 10);
}

TEST(WorkerPoolTest, NeverJumpsTheQueueOrRunsBesideTheWorker) {
  WorkerPool pool(1);
  Gate gate;
  std::vector<int> order;
  std::mutex order_mu;
  auto record = [&](int k) {
    std::lock_guard<std::mutex> lock(order_mu);
    order.push_back(k);
  };
  std::atomic<bool> blocker_started{false};
  WorkerPool::Task blocker;
  blocker.run = [&] {
    blocker_started = true;
    gate.wait();
    record(0);
  };
  pool.submit(0, std::move(blocker));
  while (!blocker_started.load()) std::this_thread::yield();
  std::vector<std::shared_ptr<WorkerPool::Ticket>> tickets;
  for (int k = 1; k <= 3; ++k) {
    WorkerPool::Task t;
    t.run = [&, k] { record(k); };
    tickets.push_back(pool.submit(0, std::move(t)));
  }
  // The worker is busy: nobody else may run its next task.
  EXPECT_FALSE(WorkerPool::run_here_if_next(tickets[0]));
  // Task 3 waits behind 1 and 2.
  EXPECT_FALSE(WorkerPool::run_here_if_next(tickets[2]));
  gate.open();
  pool.shutdown();  // lets the running one finish, cancels or runs the rest
  std::lock_guard<std::mutex> lock(order_mu);
  ASSERT_FALSE(order.empty());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
}

TEST(WorkerPoolTest, ShutdownCancelsQueuedTasksAndRefusesNewOnes) {
  WorkerPool pool(1);
  Gate gate;
  std::atomic<bool> started{false};
  WorkerPool::Task blocker;
  blocker.run = [&] {
    started = true;
    gate.wait();
  };
  pool.submit(0, std::move(blocker));
  while (!started.load()) std::this_thread::yield();
  std::atomic<int> cancelled{0}, ran{0};
  auto counted = [&] {
    WorkerPool::Task t;
    t.run = [&] { ++ran; };
    t.cancel = [&] { ++cancelled; };
    return t;
  };
  auto queued = pool.submit(0, counted());
  std::thread stopper([&] { pool.shutdown(); });
  // shutdown() cancels the queued task at once, then waits for the blocker.
  while (cancelled.load() == 0) std::this_thread::yield();
  EXPECT_FALSE(WorkerPool::run_here_if_next(queued));
  gate.open();
  stopper.join();
  pool.submit(0, counted());  // after shutdown: cancelled at once
  EXPECT_EQ(cancelled.load(), 2);
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace ddpx
