// Learning-rate schedules for the trainer, as a pure function of the global
// step so a resumed run continues on the same curve.
#ifndef DDPX_EXAMPLES_TRAINER_LR_SCHEDULE_H_
#define DDPX_EXAMPLES_TRAINER_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddpx::trainer {

enum class LrSchedule {
  kConstant,  // base_lr at every step
  // base_lr * (1 + cos(pi * step / total)) / 2: a smooth decay to 0 at the
  // last step (Loshchilov & Hutter's SGDR without restarts).
  kCosine,
};

// "constant" or "cosine"; an error names the bad value.
absl::StatusOr<LrSchedule> parse_lr_schedule(const std::string& name);

// The learning rate for step `step` (0-based) of `total_steps`. Steps past
// the end keep the final value.
float learning_rate_at(LrSchedule schedule, float base_lr, int64_t step, int64_t total_steps);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_LR_SCHEDULE_H_
