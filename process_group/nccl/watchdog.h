// The nccl backend's watchdog: a thread that polls pending work and the
// communicators, completes work whose GPU side has finished, and when an op
// runs past its timeout or a communicator reports an asynchronous error,
// aborts the communicators (so no rank hangs in NCCL forever) and fails the
// pending work with a message naming the op, its sequence number and the rank.
//
// Plain C++: what "done" and "abort" mean is passed in as functions (CUDA
// event queries and ncclCommAbort in the backend), so the timing and failure
// logic is tested on the CPU with a real thread (tests/process_group/nccl/).
#ifndef DDPX_PROCESS_GROUP_NCCL_WATCHDOG_H_
#define DDPX_PROCESS_GROUP_NCCL_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {
namespace nccl {

struct WatchedOp {
  std::string op_name;  // "allreduce"
  uint64_t sequence = 0;
  int rank = 0;
  std::string communicator;  // the CommPlan key
  std::chrono::milliseconds timeout{0};
  // true when the GPU work is done; an error if it failed.
  std::function<absl::StatusOr<bool>()> poll;
  // Called exactly once: OK when done, else the failure.
  std::function<void(absl::Status)> finish;
};

// "allreduce (seq 3) on rank 1, communicator devices:0".
std::string describe(const WatchedOp& op);

class Watchdog {
 public:
  // check_communicators: an error when a communicator reports an async
  // error (ncclCommGetAsyncError). abort_communicators: ncclCommAbort on
  // every communicator, with the reason.
  Watchdog(std::chrono::milliseconds poll_interval,
           std::function<absl::Status()> check_communicators,
           std::function<void(const absl::Status&)> abort_communicators);
  // Stops the thread; work still pending is failed with Cancelled.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(WatchedOp op);
  size_t pending() const;
  // Whether the communicators were aborted, and why.
  absl::Status aborted() const;

  // One pass over the pending work; the thread calls it every poll interval.
  void poll_once();

 private:
  void run();
  void fail_all_locked(const absl::Status& why, std::vector<WatchedOp>* failed);

  const std::chrono::milliseconds poll_interval_;
  std::function<absl::Status()> check_communicators_;
  std::function<void(const absl::Status&)> abort_communicators_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    WatchedOp op;
    std::chrono::steady_clock::time_point start;
  };
  std::list<Entry> pending_;
  absl::Status aborted_;
  bool stop_ = false;
  std::mutex poll_mu_;  // one poll_once at a time
  std::thread thread_;
};

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_WATCHDOG_H_
