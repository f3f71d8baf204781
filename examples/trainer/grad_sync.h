// How the trainer averages gradients across ranks each step.
//
// The model's backward calls mark_ready(i) as gradient i becomes final;
// finish() returns once every gradient holds the average over ranks. The
// production implementation is DDP (reducer/) with a communication hook from
// the registry (hooks/registry.h); see ddp_sync.h.
#ifndef DDPX_EXAMPLES_TRAINER_GRAD_SYNC_H_
#define DDPX_EXAMPLES_TRAINER_GRAD_SYNC_H_

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ddpx::trainer {

// One bucket's communication on this rank: hook entered, hook's future
// completed (CLOCK_MONOTONIC ns, comparable across processes on one host).
struct CommSpan {
  size_t bucket = 0;
  int64_t enter_ns = 0;
  int64_t done_ns = 0;  // 0 if it never completed
};

// What one step's synchronization cost (mirrors reducer's ReducerStats).
struct SyncStats {
  uint64_t gradient_bytes = 0;       // uncompressed gradient bytes
  uint64_t bytes_communicated = 0;   // this rank's payload to collectives
  double compression_ratio = 0.0;    // gradient_bytes / bytes_communicated
  double comm_wait_seconds = 0.0;    // time finish() blocked on communication
  size_t num_buckets = 0;
  std::vector<CommSpan> comm_spans;  // per bucket, in launch order (DDP only)
  // Per collective (bucket = call number in the step), with --comm_trace only.
  std::vector<CommSpan> collective_spans;
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // "ddp+powersgd", ...
  virtual std::string describe() const = 0;
  // Before forward/backward of a synchronized step.
  virtual absl::Status prepare() = 0;
  virtual void mark_ready(size_t param_index) = 0;
  // Waits for communication; afterwards gradients are averaged.
  virtual absl::Status finish() = 0;
  virtual SyncStats last_stats() const = 0;
  // Communication-hook state (PowerSGD error feedback, ...), per rank.
  virtual absl::Status save_state(std::ostream& out) const = 0;
  virtual absl::Status load_state(std::istream& in) = 0;
  // The hook state's iteration counter (CommHook::state_iteration), checked
  // against the step on resume; -1 when there is none.
  virtual int64_t hook_iteration() const { return -1; }
  // CommHook::drop_local_state: forgets this rank's own part of the hook
  // state (PowerSGD's error feedback).
  virtual void drop_local_hook_state() {}
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_GRAD_SYNC_H_
