#include "process_group/gloo/p2p_waiters.h"

#include "gloo/transport/unbound_buffer.h"

namespace ddpx {

P2PWaiters::~P2PWaiters() {
  std::list<std::shared_ptr<Entry>> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries.swap(entries_);
  }
  for (auto& e : entries) {
    if (e->done.load()) continue;
    for (auto& b : e->pending->buffers) {
      if (e->pending->is_recv) {
        b->abortWaitRecv();
      } else {
        b->abortWaitSend();
      }
    }
  }
  for (auto& e : entries) {
    if (e->thread.get_id() == std::this_thread::get_id()) {
      // A callback of this waiter released the backend: it goes on after
      // this returns and ends by itself (it owns its Entry).
      e->thread.detach();
    } else {
      e->thread.join();
    }
  }
}

void P2PWaiters::start(std::shared_ptr<Pending> pending,
                       std::function<void(Pending&)> wait) {
  std::lock_guard<std::mutex> lock(mu_);
  reap_locked();
  auto e = std::make_shared<Entry>();
  e->pending = std::move(pending);
  e->thread = std::thread([e, wait = std::move(wait)] {
    wait(*e->pending);
    e->done.store(true);
  });
  entries_.push_back(std::move(e));
}

void P2PWaiters::reap_locked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ddpx
