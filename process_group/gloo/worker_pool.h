// A fixed set of threads, each draining its own FIFO queue. GlooBackend pins
// every collective to one worker (by sequence number), so each worker's Gloo
// context sees its ops in the same order on every rank.
#ifndef DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_
#define DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_

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
  struct Task {
    std::function<void()> run;
    // Called instead of run() for tasks still queued at shutdown.
    std::function<void()> cancel;
  };

  explicit WorkerPool(int num_workers);
  // shutdown().
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  // Queues `task` on worker `index`; after shutdown the task is cancelled at
  // once.
  void submit(int index, Task task);
  // Cancels queued tasks, lets running ones finish, joins the threads.
  void shutdown();

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable ready;
    std::deque<Task> queue;
    bool stopping = false;
    std::thread thread;
  };
  static void loop(Worker* worker);

  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_WORKER_POOL_H_
