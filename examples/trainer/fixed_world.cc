#include "examples/trainer/fixed_world.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/trainer.h"

namespace ddpx::trainer {

std::string FixedWorld::describe() const { return absl::StrCat(pg_->size(), " ranks"); }

absl::Status FixedWorld::start(const TrainConfig& config, Progress& progress, TrainStep& step,
                               ChangeListener on_change) {
  (void)on_change;  // the world does not change
  sampler_.emplace(step.train_size(), pg_->rank(), pg_->size(), config.seed);
  batch_size_ = config.batch_size;
  steps_per_epoch_ = (sampler_->shard_size() + batch_size_ - 1) / batch_size_;
  progress_ = &progress;
  step_ = &step;
  return absl::OkStatus();
}

Batch FixedWorld::next_batch() {
  if (progress_->step_in_epoch >= steps_per_epoch_) return Batch{nullptr, 0, true};
  const int64_t first = progress_->step_in_epoch * batch_size_;
  return Batch{order_.data() + first, std::min(batch_size_, sampler_->shard_size() - first),
               false};
}

absl::StatusOr<std::optional<double>> FixedWorld::take_step(const Batch& batch, float lr) {
  absl::StatusOr<double> loss = step_->step(batch.samples, batch.size, lr);
  if (!loss.ok()) return loss.status();
  return std::optional<double>(*loss);
}

absl::Status FixedWorld::save_checkpoint(const CheckpointOptions& options,
                                         const Progress& progress) {
  return trainer::save_checkpoint(options, *pg_, progress, step_->state(), step_->sync());
}

absl::StatusOr<std::optional<Progress>> FixedWorld::resume(const CheckpointOptions& options) {
  return resume_from_checkpoint(options, *pg_, step_->state(), step_->sync());
}

}  // namespace ddpx::trainer
