// What powerSGD_hook and batched_powerSGD_hook share: the state, the process
// group, traffic counting, the plain allreduce before start_powerSGD_iter,
// and checkpointing. Subclasses say how a compressed step is laid out.
#ifndef DDPX_HOOKS_POWERSGD_HOOK_BASE_H_
#define DDPX_HOOKS_POWERSGD_HOOK_BASE_H_

#include <functional>
#include <iosfwd>
#include <memory>

#include "cuda/device_kernels.h"
#include "hooks/comm_hook.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_state.h"
#include "hooks/powersgd_step.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {

class PowerSGDHookBase : public CountingHook {
 public:
  // A null `pg` is a group of one that never communicates (PowerSGD's own
  // work alone, for benchmarks); the hook factory never makes one.
  PowerSGDHookBase(std::shared_ptr<ProcessGroup> pg,
                   std::shared_ptr<PowerSGDState> state);

  // Before start_powerSGD_iter: torch's _allreduce_fut, the allreduce hook
  // exactly. From then on: run_compressed().
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) final;
  absl::Status save_state(std::ostream& out) const override;
  absl::Status load_state(std::istream& in) override;
  int64_t state_iteration() const override { return state_->iter(); }
  void drop_local_state() override { state_->drop_error_feedback(); }
  HookStats stats() const override { return counter_->snapshot(); }

  PowerSGDState& state() { return *state_; }
  const std::shared_ptr<PowerSGDState>& shared_state() const { return state_; }

 protected:
  virtual std::shared_ptr<Future<Tensor>> run_compressed(GradBucket& bucket) = 0;
  // kernels_for() the bucket (checked in run()).
  static DeviceKernels& kernels_of(const GradBucket& bucket);
  // Runs one compressed step of `bucket` over `work` (float32, on the
  // bucket's device) laid out by `plan`: on the CPU with the memories in the
  // host vectors, on a device with them there (powersgd_step.h). `finish`
  // produces the future's value once `work` holds the result; it may queue
  // device work (the step waits for it before completing). P, Q and the
  // uncompressed batch travel in the bucket's dtype.
  std::shared_ptr<Future<Tensor>> start_step(
      const GradBucket& bucket, Tensor work, CompressionPlan plan,
      std::function<absl::StatusOr<Tensor>()> finish);

 private:

  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<PowerSGDState> state_;
  std::shared_ptr<HookStatsCounter> counter_ = std::make_shared<HookStatsCounter>();
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_HOOK_BASE_H_
