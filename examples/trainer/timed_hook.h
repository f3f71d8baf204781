// A communication hook wrapper that records, per bucket of a step, when the
// hook was entered and when its future completed, on the host's monotonic
// clock (CLOCK_MONOTONIC, shared by every process on one machine).
//
// With every rank's spans on one clock a benchmark can measure what the
// network costs without counting stragglers: a collective cannot start
// before the LAST rank enters it, so for each bucket
//   transfer = (latest completion over ranks) - (latest entry over ranks)
// is the time the hook really spent communicating (plus its own
// compression math between collectives); a rank that arrives early and waits
// is not charged for waiting. examples/benchmarks/comm_time.py sums it per
// step (as the union of the buckets' intervals, which may overlap).
#ifndef DDPX_EXAMPLES_TRAINER_TIMED_HOOK_H_
#define DDPX_EXAMPLES_TRAINER_TIMED_HOOK_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "examples/trainer/grad_sync.h"
#include "hooks/comm_hook.h"

namespace ddpx::trainer {

class TimedCommHook : public CommHook {
 public:
  explicit TimedCommHook(std::unique_ptr<CommHook> inner);

  std::string name() const override { return inner_->name(); }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override;
  absl::Status save_state(std::ostream& out) const override { return inner_->save_state(out); }
  absl::Status load_state(std::istream& in) override { return inner_->load_state(in); }
  int64_t state_iteration() const override { return inner_->state_iteration(); }
  void drop_local_state() override { inner_->drop_local_state(); }

  // The spans recorded since the last call, and forgets them. Call after the
  // step's futures completed (DDP's finalize_backward waited for them).
  std::vector<CommSpan> take_spans();

  static int64_t now_ns();

 private:
  std::unique_ptr<CommHook> inner_;
  std::mutex mu_;  // spans_ is written from the completing (Gloo) threads
  std::vector<CommSpan> spans_;
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_TIMED_HOOK_H_
