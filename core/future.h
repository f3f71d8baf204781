// A value that becomes available later, completed from any thread.
//
// Collectives return Work whose get_future() is a Future; hooks return
// Future<Tensor>. then(fn) chains work without blocking: fn runs on the
// thread that completes this future (or at once if already complete), and an
// error skips fn and flows into the returned future.
#ifndef DDPX_CORE_FUTURE_H_
#define DDPX_CORE_FUTURE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ddpx {

// Wait without a deadline (any negative duration does). An op's timeout is
// another thing, of another type: OpTimeout in options.h.
inline constexpr std::chrono::milliseconds kNoTimeout{-1};

template <typename T>
class Future;
class FutureWork;

namespace future_internal {
template <typename R>
struct Unwrap {
  using type = R;
};
template <typename U>
struct Unwrap<absl::StatusOr<U>> {
  using type = U;
};
}  // namespace future_internal

template <typename T>
class Future : public std::enable_shared_from_this<Future<T>> {
 public:
  using Callback = std::function<void(Future<T>&)>;

  // Only through create() (the key is private); public for make_shared,
  // which puts the future and its reference counts in one allocation, and
  // for FutureWork, whose Work may hold its future in its own allocation.
  class Key {
    friend class Future;
    friend class FutureWork;
    explicit Key() = default;
  };
  explicit Future(Key) {}

  static std::shared_ptr<Future<T>> create() { return std::make_shared<Future<T>>(Key()); }
  static std::shared_ptr<Future<T>> ready(T value) {
    auto f = create();
    f->set_value(std::move(value));
    return f;
  }
  static std::shared_ptr<Future<T>> failed(absl::Status error) {
    auto f = create();
    f->set_error(std::move(error));
    return f;
  }

  // The first completion wins; later ones are ignored (returns false).
  bool set_value(T value) { return complete(absl::OkStatus(), std::move(value)); }
  bool set_error(absl::Status error) {
    if (error.ok()) error = absl::InternalError("future failed with an OK status");
    return complete(std::move(error), std::nullopt);
  }
  bool set_result(absl::StatusOr<T> result) {
    if (result.ok()) return set_value(std::move(*result));
    return set_error(result.status());
  }

  bool is_completed() const { return done_.load(std::memory_order_acquire); }

  // Blocks until completion or `timeout` (kNoTimeout: forever). Returns the
  // future's error, or DeadlineExceeded if it did not complete in time.
  absl::Status wait(std::chrono::milliseconds timeout = kNoTimeout) const {
    // Completed already (a small op finished where it was issued): the
    // status no longer changes, no lock needed.
    if (done_.load(std::memory_order_acquire)) return status_;
    std::unique_lock<std::mutex> lock(mu_);
    const auto done = [&] { return done_.load(std::memory_order_relaxed); };
    if (timeout < std::chrono::milliseconds::zero()) {
      cv_.wait(lock, done);
    } else if (!cv_.wait_for(lock, timeout, done)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "future not completed within ", timeout.count(), " ms"));
    }
    return status_;
  }

  // Waits, then returns the value or the error.
  absl::StatusOr<T> result() const {
    absl::Status s = wait();
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    return *value_;
  }
  // Waits, then returns the value; the future must have succeeded.
  T& value() {
    wait().IgnoreError();
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_.ok()) {
      fprintf(stderr, "Future::value() on a failed future: %s\n",
              status_.ToString().c_str());
      abort();
    }
    return *value_;
  }
  absl::Status status() const {
    if (done_.load(std::memory_order_acquire)) return status_;
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // Runs `cb` once complete: at once on this thread if already complete,
  // otherwise on the completing thread.
  void add_callback(Callback cb) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_.load(std::memory_order_relaxed)) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    cb(*this);
  }

  // fn(T&) returns U or absl::StatusOr<U>; the result is a Future<U>.
  template <typename F>
  auto then(F fn) {
    using R = std::invoke_result_t<F, T&>;
    using U = typename future_internal::Unwrap<R>::type;
    auto next = Future<U>::create();
    add_callback([next, fn = std::move(fn)](Future<T>& self) mutable {
      absl::Status s = self.status();
      if (!s.ok()) {
        next->set_error(s);
        return;
      }
      next->set_result(fn(self.value()));
    });
    return next;
  }

 private:
  bool complete(absl::Status status, std::optional<T> value) {
    std::vector<Callback> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_.load(std::memory_order_relaxed)) return false;
      status_ = std::move(status);
      value_ = std::move(value);
      // Release: a reader that sees it done reads status_ without the lock.
      done_.store(true, std::memory_order_release);
      callbacks.swap(callbacks_);
    }
    cv_.notify_all();
    for (auto& cb : callbacks) cb(*this);
    return true;
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  // Written under mu_; read without it by is_completed() and, once true, by
  // wait() and status() (status_ and value_ never change after that).
  std::atomic<bool> done_{false};
  absl::Status status_;
  std::optional<T> value_;
  std::vector<Callback> callbacks_;
};

// Completes when every input has; fails with the first error.
template <typename T>
std::shared_ptr<Future<std::vector<T>>> collect_all(
    const std::vector<std::shared_ptr<Future<T>>>& futures) {
  auto out = Future<std::vector<T>>::create();
  if (futures.empty()) {
    out->set_value({});
    return out;
  }
  struct Shared {
    std::mutex mu;
    size_t remaining;
    std::vector<std::shared_ptr<Future<T>>> inputs;
  };
  auto shared = std::make_shared<Shared>();
  shared->remaining = futures.size();
  shared->inputs = futures;
  for (const auto& f : futures) {
    f->add_callback([shared, out](Future<T>& done) {
      if (!done.status().ok()) {
        out->set_error(done.status());
        return;
      }
      bool last;
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        last = --shared->remaining == 0;
      }
      if (!last) return;
      std::vector<T> values;
      values.reserve(shared->inputs.size());
      for (auto& in : shared->inputs) values.push_back(in->value());
      out->set_value(std::move(values));
    });
  }
  return out;
}

}  // namespace ddpx

#endif  // DDPX_CORE_FUTURE_H_
