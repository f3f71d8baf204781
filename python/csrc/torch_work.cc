#include "python/csrc/torch_work.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

namespace ddpx_torch {

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
          c10::ListType::create(c10::TensorType::get()))) {}

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
  if (parts.empty()) {
    work->part_done(absl::OkStatus());
    return work;
  }
  for (const auto& part : parts) {
    // The callback holds the Work until the part is done, so a caller that
    // drops it early (async_op=True, never waited) cannot free what the
    // callback completes.
    part->get_future()->add_callback(
        [work](ddpx::Future<ddpx::TensorList>& done) { work->part_done(done.status()); });
  }
  return work;
}

void TorchWork::part_done(const absl::Status& status) {
  absl::Status error;
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    if (remaining_ > 0 && --remaining_ > 0) return;
    error = first_error_;
  }
  if (!error.ok()) {
    std::exception_ptr e = to_exception(error);
    finish(e);
    future_->setError(e);
    return;
  }
  try {
    if (staging_ != nullptr) staging_->copy_back();
  } catch (...) {
    std::exception_ptr e = std::current_exception();
    finish(e);
    future_->setError(e);
    return;
  }
  finish();
  future_->markCompleted(c10::IValue(outputs_));
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
