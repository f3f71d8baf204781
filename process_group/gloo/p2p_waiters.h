// Point-to-point ops are posted at once on the caller's thread (so sends and
// receives are matched in the order the user issued them) and each is then
// waited for on a thread of its own: a receive that never arrives must not
// hold up another op's completion. The destructor aborts the waits still
// pending and joins every thread, except the calling one when a callback on
// a waiter thread released the backend: that one finishes its callback and
// ends detached (no thread can join itself).
#ifndef DDPX_PROCESS_GROUP_GLOO_P2P_WAITERS_H_
#define DDPX_PROCESS_GROUP_GLOO_P2P_WAITERS_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gloo {
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace ddpx {

class P2PWaiters {
 public:
  // The buffers of one posted op; all sends or all receives.
  struct Pending {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers;
    bool is_recv = false;
  };

  P2PWaiters() = default;
  ~P2PWaiters();
  P2PWaiters(const P2PWaiters&) = delete;
  P2PWaiters& operator=(const P2PWaiters&) = delete;

  // Runs wait(*pending) on a new thread; the waits end when the buffers
  // complete, time out, or are aborted by the destructor.
  void start(std::shared_ptr<Pending> pending,
             std::function<void(Pending&)> wait);

 private:
  // Shared with its thread, which may outlive this object.
  struct Entry {
    std::shared_ptr<Pending> pending;
    std::atomic<bool> done{false};
    std::thread thread;
  };
  // Joins the threads that have finished; mu_ held.
  void reap_locked();

  std::mutex mu_;
  std::list<std::shared_ptr<Entry>> entries_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_P2P_WAITERS_H_
