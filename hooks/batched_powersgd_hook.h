// batched_powerSGD_hook (seed 002): the bucket's flat buffer, zero-padded to
// a side x side square (side = ceil(sqrt(numel))), compressed as one matrix
// with one P/Q pair per bucket; the result is truncated back to the bucket.
// The error feedback covers the padded square, as in torch.
#ifndef DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_
#define DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_

#include <memory>
#include <string>

#include "hooks/comm_hook.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_state.h"
#include "process_group/process_group.h"

namespace ddpx {

class BatchedPowerSGDHook : public CountingHook {
 public:
  BatchedPowerSGDHook(std::shared_ptr<ProcessGroup> pg,
                      std::shared_ptr<PowerSGDState> state);

  std::string name() const override { return "batched_powersgd"; }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override;
  absl::Status save_state(std::ostream& out) const override;
  absl::Status load_state(std::istream& in) override;
  HookStats stats() const override { return counter_->snapshot(); }

  PowerSGDState& state() { return *state_; }

 private:
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<PowerSGDState> state_;
  std::shared_ptr<HookStatsCounter> counter_ = std::make_shared<HookStatsCounter>();
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_
