// A handle on one in-flight collective or point-to-point operation.
#ifndef DDPX_CORE_WORK_H_
#define DDPX_CORE_WORK_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/future.h"
#include "core/options.h"
#include "core/tensor.h"

namespace ddpx {

using TensorList = std::vector<Tensor>;

class Work {
 public:
  virtual ~Work() = default;

  virtual OpType op() const = 0;
  virtual bool is_completed() const = 0;
  // True once completed without error.
  virtual bool is_success() const = 0;
  // The error, once failed; OK otherwise.
  virtual absl::Status exception() const = 0;
  // Blocks until done or `timeout` (kNoTimeout: forever) and returns the
  // error, if any. On the CPU the outputs are ready when this returns OK; on
  // CUDA (NCCL) the caller's stream is made to wait instead.
  virtual absl::Status wait(std::chrono::milliseconds timeout = kNoTimeout) = 0;
  // Completes with the op's output tensors.
  virtual std::shared_ptr<Future<TensorList>> get_future() = 0;
  // For recv_anysource: the rank the message came from (-1 before then).
  virtual int source_rank() const { return -1; }
  // Fails the work (and its future) with Cancelled.
  virtual void abort() = 0;
};

// The usual Work: a future plus the op it belongs to. Backends complete it
// with finish() / fail().
class FutureWork : public Work {
 public:
  explicit FutureWork(OpType op) : FutureWork(op, Future<TensorList>::create()) {}

  // A Work that has already failed: how bad input is reported.
  static std::shared_ptr<FutureWork> failed(OpType op, absl::Status error) {
    auto w = std::make_shared<FutureWork>(op);
    w->fail(std::move(error));
    return w;
  }

  OpType op() const override { return op_; }
  bool is_completed() const override { return future_->is_completed(); }
  bool is_success() const override {
    return future_->is_completed() && future_->status().ok();
  }
  absl::Status exception() const override {
    return future_->is_completed() ? future_->status() : absl::OkStatus();
  }
  absl::Status wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    return future_->wait(timeout);
  }
  std::shared_ptr<Future<TensorList>> get_future() override { return owned_future_; }
  int source_rank() const override { return source_rank_; }
  void abort() override {
    fail(absl::CancelledError(std::string(op_type_name(op_)) + ": aborted"));
  }

  void finish(TensorList outputs, int source_rank = -1) {
    source_rank_ = source_rank;
    future_->set_value(std::move(outputs));
  }
  void fail(absl::Status error) { future_->set_error(std::move(error)); }

 protected:
  // For a Work that holds its future itself (GlooWork: one allocation for
  // both); it overrides get_future() to hand out `*future` as part of it.
  FutureWork(OpType op, Future<TensorList>* future) : op_(op), future_(future) {}
  static Future<TensorList>::Key future_key() { return Future<TensorList>::Key(); }

  // For backends whose Work completes its future in its own way (NcclWork).
  const OpType op_;
  Future<TensorList>* const future_;

 private:
  FutureWork(OpType op, std::shared_ptr<Future<TensorList>> future)
      : op_(op), future_(future.get()), owned_future_(std::move(future)) {}

  // Null when the subclass holds the future.
  const std::shared_ptr<Future<TensorList>> owned_future_;
  std::atomic<int> source_rank_{-1};
};

// A Work that succeeded before it was handed out (a small op done on its
// issuing thread): it holds the outputs, and makes its completed future the
// first time one is asked for, so that an op nobody asks sets up no future,
// lock or waiter for a wait that returns at once.
class CompletedWork : public Work {
 public:
  CompletedWork(OpType op, TensorList outputs) : op_(op), outputs_(std::move(outputs)) {}
  // One output, kept without a list of its own (an op's cost is a few
  // hundred nanoseconds there, and a list is an allocation).
  CompletedWork(OpType op, const Tensor& output) : op_(op), single_output_(output) {}

  OpType op() const override { return op_; }
  bool is_completed() const override { return true; }
  bool is_success() const override { return true; }
  absl::Status exception() const override { return absl::OkStatus(); }
  absl::Status wait(std::chrono::milliseconds /*timeout*/ = kNoTimeout) override {
    return absl::OkStatus();
  }
  // The same future every time.
  std::shared_ptr<Future<TensorList>> get_future() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (future_ == nullptr) {
      future_ = Future<TensorList>::ready(single_output_.has_value() ? TensorList{*single_output_}
                                                                      : outputs_);
      future_made_.store(true, std::memory_order_release);
    }
    return future_;
  }
  void abort() override {}  // done already: as for any completed Work, nothing changes

  // Makes this work, made with one output and no longer held by anybody
  // but the caller, the work of a later op of the same kind with `output`:
  // a caller that issues small ops on one tensor over and over then
  // allocates and copies nothing per op (a copy of a Tensor allocates its
  // shape). Of the mutable state only get_future() reads, under the lock,
  // and says so in future_made_: a holder that never asked for the future
  // left nothing to synchronize with.
  void reuse_for(const Tensor& output) {
    if (future_made_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      future_.reset();
      future_made_.store(false, std::memory_order_relaxed);
    }
    const Tensor& held = *single_output_;
    if (!held.shares_storage_with(output) || held.storage_offset() != output.storage_offset() ||
        held.dtype() != output.dtype() || held.shape() != output.shape()) {
      single_output_ = output;
    }
  }

 private:
  const OpType op_;
  const TensorList outputs_;
  std::optional<Tensor> single_output_;  // changed by reuse_for() only
  std::mutex mu_;  // future_
  std::shared_ptr<Future<TensorList>> future_;
  std::atomic<bool> future_made_{false};  // future_ is set
};

// Waits for one step of an algorithm made of several ops; a failure keeps
// its code and says "<algorithm> (<step>): " first, so the error names the
// step that failed, not just the op.
inline absl::Status wait_step(const std::shared_ptr<Work>& work, absl::string_view algorithm,
                              absl::string_view step) {
  absl::Status s = work->wait();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(algorithm, " (", step, "): ", s.message()));
}

}  // namespace ddpx

#endif  // DDPX_CORE_WORK_H_
