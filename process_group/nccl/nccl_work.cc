#include "process_group/nccl/nccl_work.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace nccl {

NcclWork::NcclWork(OpType op, std::shared_ptr<NcclComm> comm,
                   std::vector<CudaEvent> done_events, TensorList in_use, TensorList outputs,
                   bool blocking_wait)
    : FutureWork(op),
      comm_(std::move(comm)),
      done_events_(std::move(done_events)),
      blocking_wait_(blocking_wait),
      in_use_(std::move(in_use)),
      outputs_(std::move(outputs)) {}

absl::StatusOr<bool> NcclWork::poll() const {
  for (const CudaEvent& e : done_events_) {
    absl::StatusOr<bool> done = e.query();
    if (!done.ok() || !*done) return done;
  }
  return true;
}

void NcclWork::finish(absl::Status status) {
  TensorList outputs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_.clear();
    outputs = outputs_;
  }
  if (status.ok()) {
    future_->set_value(std::move(outputs));
  } else {
    future_->set_error(std::move(status));
  }
}

absl::Status NcclWork::wait(std::chrono::milliseconds timeout) {
  if (future_->is_completed() && !future_->status().ok()) return future_->status();
  if (!blocking_wait_) {
    // The caller's stream waits on the GPU; the host goes on at once.
    for (size_t i = 0; i < done_events_.size(); ++i) {
      DeviceGuard guard(comm_->device(i));
      if (!guard.status().ok()) return guard.status();
      if (absl::Status s = done_events_[i].block(current_stream(comm_->device(i))); !s.ok())
        return s;
    }
    return absl::OkStatus();
  }
  // Blocking wait: poll the events ourselves rather than wait for the
  // watchdog's next pass.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (future_->is_completed()) return future_->status();
    absl::StatusOr<bool> done = poll();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    if (timeout >= std::chrono::milliseconds::zero() &&
        std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "nccl: ", op_type_name(op_), " on communicator ", comm_->key(),
          " not done within ", timeout.count(), " ms (blocking wait)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclWork::abort() {
  future_->set_error(absl::CancelledError(
      absl::StrCat(op_type_name(op_), " on communicator ", comm_->key(), ": aborted")));
}

}  // namespace nccl
}  // namespace ddpx
