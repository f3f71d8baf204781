#include "examples/trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"

namespace ddpx::trainer {

absl::StatusOr<LrSchedule> parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  return absl::InvalidArgumentError("--lr_schedule=" + name + ": expected constant or cosine");
}

float learning_rate_at(LrSchedule schedule, float base_lr, int64_t step, int64_t total_steps) {
  if (schedule == LrSchedule::kConstant || total_steps <= 0) return base_lr;
  const double progress = std::min(1.0, double(step) / double(total_steps));
  return static_cast<float>(base_lr * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace ddpx::trainer
