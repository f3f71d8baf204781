// The membership of an ordinary run (membership.h): the ranks of one
// process group from start to end. Each rank trains on its
// DistributedSampler shard (examples/data/sampler.h), torch's DDP data
// order; a failed step or collective ends the run with its error (the
// launcher then ends the job; a checkpoint resumes it).
#ifndef DDPX_EXAMPLES_TRAINER_FIXED_WORLD_H_
#define DDPX_EXAMPLES_TRAINER_FIXED_WORLD_H_

#include <memory>
#include <optional>
#include <vector>

#include "examples/data/sampler.h"
#include "examples/trainer/membership.h"

namespace ddpx::trainer {

class FixedWorld : public Membership {
 public:
  explicit FixedWorld(std::shared_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}

  ProcessGroup& pg() override { return *pg_; }
  std::string describe() const override;
  absl::Status start(const TrainConfig& config, Progress& progress, TrainStep& step,
                     ChangeListener on_change) override;
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void begin_epoch(int64_t epoch) override { order_ = sampler_->indices(epoch); }
  Batch next_batch() override;
  absl::StatusOr<std::optional<double>> take_step(const Batch& batch, float lr) override;
  absl::Status save_checkpoint(const CheckpointOptions& options,
                               const Progress& progress) override;
  absl::StatusOr<std::optional<Progress>> resume(const CheckpointOptions& options) override;
  // A barrier: a rank that exits while a peer still reads its last
  // collective can reset the connection under it.
  absl::Status finish() override { return pg_->barrier()->wait(); }

 private:
  const std::shared_ptr<ProcessGroup> pg_;
  std::optional<data::DistributedSampler> sampler_;
  int64_t batch_size_ = 1;
  int64_t steps_per_epoch_ = 0;
  std::vector<int64_t> order_;  // this rank's shard of the epoch
  const Progress* progress_ = nullptr;
  TrainStep* step_ = nullptr;
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_FIXED_WORLD_H_
