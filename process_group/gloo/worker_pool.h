// A fixed set of threads, each draining its own FIFO queue. GlooBackend pins
// every collective to one worker (by sequence number), so each worker's Gloo
// context sees its ops in the same order on every rank.
//
// A task may also run on the thread that waits for it (run_here_if_next):
// when it is at the head of its worker's queue and that worker is idle, the
// waiter takes it instead of sleeping while the worker wakes up, runs it and
// wakes the waiter again. Order per worker is unchanged (a worker runs one
// task at a time, whoever runs it), so this is invisible to peers; it only
// removes two thread hand-offs from a waited-on op's latency.
//
// Waking the worker at submit still costs a waited-on op: the woken thread
// needs a CPU at the moment the op's peers do (on 4 ranks over 2 vCPUs,
// ours was 1.2-1.3x raw Gloo's median small-op latency with the wake and
// equal without it). So a worker whose last few tasks were all run by their
// waiters turns lazy: submit no longer wakes it; it looks at its queue by
// itself, leaving a task to its waiter until the task is kLazyGrace old.
// Its looks back off from kLazyPollMin to kLazyPollMax (at 0.5 ms, eight
// lazy workers' looks alone cost a 4-rank op 20% of its median; at 5 ms
// nothing). A task nobody waits for therefore still starts within about
// kLazyPollMax + kLazyGrace (the progress guarantee of an asynchronous op),
// and the first such task turns the worker eager again, as do
// kLazyIdlePolls empty looks in a row.
//
// A caller may also claim an idle worker with nothing queued (try_claim) to
// begin an op on its own thread at issue, and hand what it could not finish
// there back as the worker's next task (release_claim): the small
// shared-memory allreduce does (gloo_backend.h).
//
// A task may end the pool's owner: a callback that releases the last
// reference to its group destroys the backend, and with it this pool, on the
// pool's own thread (a worker, or a waiter running a task). shutdown() then
// waits for every other thread and task, and leaves the calling thread's
// own task to finish: a worker that shuts down its own pool detaches itself
// (no thread can join itself), and it keeps its queue (Lane) alive itself.
#ifndef DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_
#define DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ddpx {

class WorkerPool {
 public:
  // Consecutive tasks run by their waiters after which a worker turns lazy.
  static constexpr int kLazyAfterInlineRuns = 4;
  // How long a lazy worker leaves a queued task to its waiter.
  static constexpr std::chrono::microseconds kLazyGrace{500};
  // A lazy worker's interval between looks at an empty queue: doubles from
  // the first to the second.
  static constexpr std::chrono::microseconds kLazyPollMin{1000};
  static constexpr std::chrono::microseconds kLazyPollMax{8000};
  // Looks in a row at an empty queue after which a lazy worker goes back to
  // sleeping until woken (~100 ms; tasks its waiters ran between two looks
  // leave the queue empty too).
  static constexpr int kLazyIdlePolls = 16;

  struct Task {
    std::function<void()> run;
    // Called instead of run() for tasks still queued at shutdown.
    std::function<void()> cancel;
  };
  // One submitted task. Holding it never keeps the pool alive longer than
  // its owner wants; the task itself is released once run or cancelled.
  class Ticket;

  explicit WorkerPool(int num_workers);
  // shutdown().
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(lanes_.size()); }
  // Queues `task` on worker `index`; after shutdown the task is cancelled at
  // once (and the returned ticket is spent).
  std::shared_ptr<Ticket> submit(int index, Task task);
  // Runs the ticket's task on the calling thread if it is the next task of
  // its worker and that worker is idle; returns whether it did. False when
  // it already ran, is running, waits behind another task, or the pool is
  // shutting down.
  static bool run_here_if_next(const std::shared_ptr<Ticket>& ticket);
  // Claims worker `index` for the calling thread when it is idle with
  // nothing queued: the op the caller is about to issue on it may begin
  // right here, and whatever is submitted meanwhile waits behind it. False
  // when the worker is busy, has tasks queued or is shutting down.
  bool try_claim(int index);
  // Ends a claim. With a task (the rest of an op the caller began), that
  // task goes first in the worker's queue, and its ticket is returned.
  std::shared_ptr<Ticket> release_claim(int index, Task rest = {});
  // Cancels queued tasks, lets running ones finish (also those a waiter runs
  // on its own thread), joins the threads. Called from inside a task of this
  // pool (its owner released there), it waits for everything but that task,
  // and if the caller is one of the pool's workers, that thread is detached
  // instead of joined: it ends by itself once its task returns.
  void shutdown();

 private:
  struct Lane;
  static void loop(Lane* lane);
  // Runs a task taken off `lane` (which is marked busy), then frees it.
  static void run_and_release(Lane& lane, Task task);
  // Whether the calling thread is inside a task of `lane` (run_and_release).
  static bool running_here(const Lane* lane);

  std::vector<std::shared_ptr<Lane>> lanes_;
  std::vector<std::thread> threads_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_
