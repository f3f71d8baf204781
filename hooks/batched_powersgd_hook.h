// batched_powerSGD_hook (PyTorch's "DDP Communication Hooks", PowerSGD): the
// bucket's flat buffer, zero-padded to a side x side square
// (side = ceil(sqrt(numel))), compressed as one matrix with one P/Q pair per
// bucket; the result is truncated back to the bucket.
// The error feedback covers the padded square, as in torch.
#ifndef DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_
#define DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_

#include <string>

#include "hooks/powersgd_hook_base.h"

namespace ddpx {

class BatchedPowerSGDHook : public PowerSGDHookBase {
 public:
  using PowerSGDHookBase::PowerSGDHookBase;
  std::string name() const override { return "batched_powersgd"; }

 protected:
  std::shared_ptr<Future<Tensor>> run_compressed(GradBucket& bucket) override;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_BATCHED_POWERSGD_HOOK_H_
