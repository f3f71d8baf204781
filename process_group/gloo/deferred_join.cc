#include "process_group/gloo/deferred_join.h"

#include <mutex>
#include <utility>
#include <vector>

namespace ddpx {
namespace {

class Reaper {
 public:
  // At exit: join what has ended, leave the rest running.
  ~Reaper() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries_) {
      if (e.finished->load()) {
        e.thread.join();
      } else {
        e.thread.detach();
      }
    }
  }

  void add(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished) {
    std::vector<std::thread> ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->finished->load()) {
          ended.push_back(std::move(it->thread));
          it = entries_.erase(it);
        } else {
          ++it;
        }
      }
      entries_.push_back(Entry{std::move(thread), std::move(finished)});
    }
    // Their functions have returned: each join is a moment.
    for (std::thread& t : ended) t.join();
  }

 private:
  struct Entry {
    std::thread thread;
    std::shared_ptr<const std::atomic<bool>> finished;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

Reaper& reaper() {
  static Reaper r;
  return r;
}

}  // namespace

void join_when_finished(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished) {
  reaper().add(std::move(thread), std::move(finished));
}

}  // namespace ddpx
