// The Work of a GlooBackend op (not part of the API).
#ifndef DDPX_PROCESS_GROUP_GLOO_GLOO_WORK_H_
#define DDPX_PROCESS_GROUP_GLOO_GLOO_WORK_H_

#include <chrono>
#include <memory>

#include "process_group/gloo/worker_pool.h"
#include "core/work.h"

namespace ddpx {

// A Work whose wait() runs the op on the waiting thread when its worker has
// not started it yet and is idle (see WorkerPool::run_here_if_next): the
// common "issue, then wait at once" pattern then costs no thread hand-off.
// Ops nobody waits for still run on their worker, asynchronously. An op
// that completed where it was issued has no ticket.
//
// Its future is a member, so an op allocates one block for both; the future
// get_future() hands out shares the work's ownership. Made with make_shared
// only (get_future() needs it).
class GlooWork : public FutureWork, public std::enable_shared_from_this<GlooWork> {
 public:
  GlooWork(OpType op, std::chrono::milliseconds op_timeout)
      : FutureWork(op, &own_future_), own_future_(future_key()), op_timeout_(op_timeout) {}

  std::shared_ptr<Future<TensorList>> get_future() override {
    return std::shared_ptr<Future<TensorList>>(shared_from_this(), &own_future_);
  }

  // Set once, before the work is handed to the caller.
  void set_ticket(std::shared_ptr<WorkerPool::Ticket> ticket) {
    ticket_ = std::move(ticket);
  }

  absl::Status wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    // Only when the op's own timeout ends it within the caller's wait.
    if (ticket_ != nullptr && !is_completed() &&
        (timeout < std::chrono::milliseconds::zero() || timeout >= op_timeout_)) {
      WorkerPool::run_here_if_next(ticket_);
    }
    return FutureWork::wait(timeout);
  }

 private:
  Future<TensorList> own_future_;  // future_ points here
  const std::chrono::milliseconds op_timeout_;
  std::shared_ptr<WorkerPool::Ticket> ticket_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_GLOO_WORK_H_
