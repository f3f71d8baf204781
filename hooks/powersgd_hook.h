// PowerSGD communication hooks (Vogels et al., "PowerSGD: Practical Low-Rank
// Gradient Compression for Distributed Optimization", NeurIPS 2019; torch's
// hooks in PyTorch's "DDP Communication Hooks" documentation).
//
//   auto hook = make_powersgd_hook(pg, {{"rank", "2"}, {"start_iter", "10"}},
//                                  /*batched=*/false).value();
//   hook->run(bucket)->wait();
//
// PowerSGDHook is torch's powerSGD_hook: layer-wise low-rank compression of
// every gradient matrix worth compressing. BatchedPowerSGDHook
// (batched_powersgd_hook.h) is batched_powerSGD_hook: the whole bucket as one
// zero-padded square. Before start_powerSGD_iter both are the allreduce hook.
#ifndef DDPX_HOOKS_POWERSGD_HOOK_H_
#define DDPX_HOOKS_POWERSGD_HOOK_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "hooks/powersgd_hook_base.h"
#include "hooks/powersgd_state.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {

class PowerSGDHook : public PowerSGDHookBase {
 public:
  using PowerSGDHookBase::PowerSGDHookBase;
  std::string name() const override { return "powersgd"; }

 protected:
  std::shared_ptr<Future<Tensor>> run_compressed(GradBucket& bucket) override;
};

// Parses hook options into PowerSGDOptions. Keys (value syntax):
//   rank (int >= 1)             matrix_approximation_rank
//   start_iter (int >= 0)       start_powerSGD_iter
//   min_compression_rate (> 0)  min_compression_rate
//   use_error_feedback (0/1)    warm_start (0/1)
//   epsilon (float >= 0)        orthogonalization_epsilon
//   seed (uint64)               random_seed
//   stats_frequency (int)       compression_stats_logging_frequency
//   batch_same_shape (0/1)      batch_tensors_with_same_shape
// Unknown keys and unparsable values are errors naming the key and value;
// the result is validated (e.g. start_iter >= 2 with error feedback).
absl::StatusOr<PowerSGDOptions> parse_powersgd_options(
    const std::map<std::string, std::string>& options);

// The registry's entry point: "powersgd:rank=2,start_iter=10" arrives here as
// {{"rank","2"},{"start_iter","10"}}; `batched` picks batched_powerSGD_hook.
absl::StatusOr<std::unique_ptr<CommHook>> make_powersgd_hook(
    std::shared_ptr<ProcessGroup> pg,
    const std::map<std::string, std::string>& options, bool batched);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_HOOK_H_
