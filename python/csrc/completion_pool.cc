#include "python/csrc/completion_pool.h"

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

namespace ddpx_torch {
namespace {

class CompletionPool {
 public:
  void post(std::function<void()> task) {
    bool grow = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      // Each idle thread takes one task; more tasks than idle threads means
      // one of them would wait behind a task that may block.
      if (tasks_.size() > idle_) {
        grow = true;
        ++idle_;  // the new thread counts as idle until it takes its task
      }
    }
    if (grow) {
      std::thread([this] { loop(); }).detach();
    } else {
      cv_.notify_one();
    }
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !tasks_.empty(); });
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      --idle_;
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        // A throwing callback must not end the process from a thread torch
        // does not know about; torch's Future reports callback errors itself.
        std::fprintf(stderr, "ddpx: a future's completion threw: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "ddpx: a future's completion threw\n");
      }
      task = nullptr;  // its captures go before the thread counts as idle
      lock.lock();
      ++idle_;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t idle_ = 0;
};

}  // namespace

void run_off_worker(std::function<void()> task) {
  // Never destroyed: its detached threads outlive static destruction.
  static CompletionPool* const pool = new CompletionPool();
  pool->post(std::move(task));
}

}  // namespace ddpx_torch
