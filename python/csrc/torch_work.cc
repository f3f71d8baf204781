#include "python/csrc/torch_work.h"

#include <atomic>
#include <utility>

#include <Python.h>

#include "absl/strings/str_cat.h"
#include "python/csrc/completion_pool.h"
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

namespace ddpx_torch {
namespace {

std::atomic<bool> python_exiting{false};
// Set while a ddpx thread completes a Work: a future callback that waits on
// a Work there must not wait for that very thread to let go.
thread_local bool completing_a_work = false;

// Drops a ddpx thread's reference to `work`, or leaks it while the
// interpreter shuts down (mark_python_exiting).
void release_on_background_thread(c10::intrusive_ptr<TorchWork>& work) {
  if (python_exiting.load(std::memory_order_acquire) || _Py_IsFinalizing()) {
    (void)work.release();  // the process is ending: its memory goes with it
    return;
  }
  work.reset();
}

}  // namespace

void mark_python_exiting() { python_exiting.store(true, std::memory_order_release); }

c10::DistBackendError backend_error(const std::string& message) {
  return c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, message);
}

std::exception_ptr to_exception(const absl::Status& status) {
  return std::make_exception_ptr(backend_error(
      absl::StrCat("ddpx: ", absl::StatusCodeToString(status.code()), ": ", status.message())));
}

TorchWork::TorchWork(int rank, c10d::OpType type, const char* profiling_title,
                     std::vector<at::Tensor> outputs, std::shared_ptr<Staging> staging,
                     uint64_t sequence_number, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type, profiling_title),
      outputs_(std::move(outputs)),
      staging_(std::move(staging)),
      sequence_number_(sequence_number),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::ofTensors())) {}

c10::intrusive_ptr<c10d::Work> TorchWork::track(c10::intrusive_ptr<TorchWork> work,
                                                std::vector<std::shared_ptr<ddpx::Work>> parts) {
  for (const auto& part : parts) {
    if (part->is_completed() && !part->is_success()) {
      // Bad arguments fail before anything was sent: raise from the call.
      std::rethrow_exception(to_exception(part->exception()));
    }
  }
  {
    std::lock_guard<std::mutex> lock(work->parts_mu_);
    work->parts_ = parts;
    work->remaining_ = parts.size();
  }
  work->holders_->add(parts.size());
  if (parts.empty()) {
    work->complete();  // not handed out yet: nobody can have a callback on it
    return work;
  }
  for (const auto& part : parts) {
    // The callback holds the Work until the part is done, so a caller that
    // drops it early (async_op=True, never waited) cannot free what the
    // callback completes.
    part->get_future()->add_callback(
        [work, holders = work->holders_](ddpx::Future<ddpx::TensorList>& done) mutable {
          completing_a_work = true;
          if (work->part_done(done.status())) {
            std::unique_lock<std::mutex> lock(work->future_mu_);
            if (work->future_handed_out_) {
              lock.unlock();
              // Its callbacks may wait on further ops of this group: not on
              // this worker. The completion thread takes over this hold.
              run_off_worker([work = std::move(work), holders]() mutable {
                completing_a_work = true;
                work->complete();
                completing_a_work = false;
                release_on_background_thread(work);
                holders->drop();
              });
              completing_a_work = false;
              return;
            }
            work->complete();
          }
          completing_a_work = false;
          release_on_background_thread(work);
          holders->drop();
        });
  }
  return work;
}

c10::intrusive_ptr<c10::ivalue::Future> TorchWork::getFuture() {
  std::lock_guard<std::mutex> lock(future_mu_);
  future_handed_out_ = true;
  return future_;
}

bool TorchWork::part_done(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(parts_mu_);
  if (!status.ok() && first_error_.ok()) first_error_ = status;
  return remaining_ > 0 && --remaining_ == 0;
}

void TorchWork::complete() {
  absl::Status error;
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    error = first_error_;
  }
  // The future first, as torch's Gloo does: once wait() returns, the
  // future is done too.
  std::exception_ptr e;
  if (!error.ok()) {
    e = to_exception(error);
  } else {
    try {
      if (staging_ != nullptr) staging_->copy_back();
    } catch (...) {
      e = std::current_exception();
    }
  }
  if (e) {
    future_->setError(e);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(e);
}

void TorchWork::Holders::add(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  count_ += n;
}

void TorchWork::Holders::drop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --count_;
  }
  cv_.notify_all();
}

void TorchWork::Holders::wait_none() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return count_ == 0; });
}

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == ::kNoTimeout && !isCompleted()) run_parts_here();
  bool result = false;
  std::exception_ptr error;
  try {
    result = c10d::Work::wait(timeout);
  } catch (...) {
    error = std::current_exception();
  }
  // Completed: the callbacks let go of this Work right after completing it.
  if (isCompleted() && !completing_a_work) holders_->wait_none();
  if (error) std::rethrow_exception(error);
  return result;
}

void TorchWork::run_parts_here() {
  std::vector<std::shared_ptr<ddpx::Work>> parts;
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    parts = parts_;
  }
  // A part its worker has not started runs here (GlooWork::wait), and its
  // callback completes this Work on this thread; one already running is
  // waited for, bounded by its own timeout. Its status arrives through the
  // callback (part_done), so it is not looked at here.
  for (const auto& part : parts) part->wait().IgnoreError();
}

int TorchWork::sourceRank() const {
  if (opType_ != c10d::OpType::RECVANYSOURCE) return c10d::Work::sourceRank();
  std::lock_guard<std::mutex> lock(parts_mu_);
  for (const auto& part : parts_) {
    if (part->source_rank() >= 0) return part->source_rank();
  }
  return -1;
}

void TorchWork::abort() {
  std::vector<std::shared_ptr<ddpx::Work>> parts;
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    parts = parts_;
  }
  for (const auto& part : parts) part->abort();
}

}  // namespace ddpx_torch
