#include "process_group/gloo/worker_pool.h"

namespace ddpx {

WorkerPool::WorkerPool(int num_workers) {
  for (int i = 0; i < num_workers; ++i) {
    workers_.push_back(std::make_unique<Worker>());
  }
  for (auto& w : workers_) w->thread = std::thread(&WorkerPool::loop, w.get());
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::submit(int index, Task task) {
  Worker& w = *workers_[index];
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.stopping) {
      w.queue.push_back(std::move(task));
      w.ready.notify_one();
      return;
    }
  }
  if (task.cancel) task.cancel();
}

void WorkerPool::shutdown() {
  for (auto& w : workers_) {
    std::deque<Task> dropped;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->stopping = true;
      dropped.swap(w->queue);
      w->ready.notify_all();
    }
    for (auto& t : dropped) {
      if (t.cancel) t.cancel();
    }
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void WorkerPool::loop(Worker* w) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(w->mu);
      w->ready.wait(lock, [w] { return w->stopping || !w->queue.empty(); });
      if (w->queue.empty()) return;  // stopping
      task = std::move(w->queue.front());
      w->queue.pop_front();
    }
    task.run();
  }
}

}  // namespace ddpx
