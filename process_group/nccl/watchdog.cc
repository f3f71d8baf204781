#include "process_group/nccl/watchdog.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace nccl {

std::string describe(const WatchedOp& op) {
  return absl::StrCat(op.op_name, " (seq ", op.sequence, ") on rank ", op.rank,
                      ", communicator ", op.communicator);
}

Watchdog::Watchdog(std::chrono::milliseconds poll_interval,
                   std::function<absl::Status()> check_communicators,
                   std::function<void(const absl::Status&)> abort_communicators)
    : poll_interval_(poll_interval),
      check_communicators_(std::move(check_communicators)),
      abort_communicators_(std::move(abort_communicators)) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::vector<WatchedOp> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : pending_) left.push_back(std::move(e.op));
    pending_.clear();
  }
  for (WatchedOp& op : left) {
    op.finish(absl::CancelledError(
        absl::StrCat("nccl: ", describe(op), " was still pending when the backend shut down")));
  }
}

void Watchdog::watch(WatchedOp op) {
  absl::Status aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.ok()) {
      pending_.push_back(Entry{std::move(op), std::chrono::steady_clock::now()});
      return;
    }
    aborted = aborted_;
  }
  op.finish(absl::AbortedError(absl::StrCat("nccl: ", describe(op),
                                            " cannot run: the communicators were aborted: ",
                                            aborted.message())));
}

size_t Watchdog::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

absl::Status Watchdog::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, poll_interval_, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    poll_once();
    lock.lock();
  }
}

void Watchdog::poll_once() {
  std::lock_guard<std::mutex> poll_lock(poll_mu_);
  std::list<Entry> entries;
  bool already_aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries.swap(pending_);
    already_aborted = !aborted_.ok();
  }
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<WatchedOp, absl::Status>> finished;
  absl::Status failure;  // the first reason to abort
  for (auto it = entries.begin(); it != entries.end();) {
    absl::StatusOr<bool> done = it->op.poll();
    if (done.ok() && *done) {
      finished.emplace_back(std::move(it->op), absl::OkStatus());
      it = entries.erase(it);
      continue;
    }
    absl::Status error;
    if (!done.ok()) {
      error = absl::Status(done.status().code(),
                           absl::StrCat("nccl: ", describe(it->op), " failed: ",
                                        done.status().message()));
    } else if (now - it->start > it->op.timeout) {
      error = absl::DeadlineExceededError(absl::StrCat(
          "nccl watchdog: ", describe(it->op), " did not finish within ",
          it->op.timeout.count(), " ms; the communicators were aborted"));
    }
    if (!error.ok()) {
      if (failure.ok()) failure = error;
      finished.emplace_back(std::move(it->op), error);
      it = entries.erase(it);
      continue;
    }
    ++it;
  }
  if (failure.ok() && !already_aborted) {
    absl::Status async_error = check_communicators_();
    if (!async_error.ok()) {
      failure = absl::Status(async_error.code(),
                             absl::StrCat("nccl watchdog: communicator error: ",
                                          async_error.message(),
                                          "; the communicators were aborted"));
    }
  }
  if (!failure.ok() && !already_aborted) {
    // Once: later passes only fail what is left (see the end).
    abort_communicators_(failure);
    // Nothing still queued on an aborted communicator can finish.
    for (Entry& e : entries) {
      finished.emplace_back(
          std::move(e.op), absl::AbortedError(absl::StrCat(
                               "nccl: ", describe(e.op),
                               " aborted with its communicators: ", failure.message())));
    }
    entries.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure.ok() && aborted_.ok()) aborted_ = failure;
    // Work added while we polled goes after the older work.
    entries.splice(entries.end(), pending_);
    pending_.swap(entries);
    if (!aborted_.ok()) {
      for (Entry& e : pending_) {
        finished.emplace_back(std::move(e.op),
                              absl::AbortedError(absl::StrCat(
                                  "nccl: ", describe(e.op),
                                  " aborted with its communicators: ", aborted_.message())));
      }
      pending_.clear();
    }
  }
  // Callbacks run outside the locks: they complete futures and run user code.
  for (auto& [op, status] : finished) op.finish(status);
}

}  // namespace nccl
}  // namespace ddpx
