// Who trains, on which samples, and what becomes of a step whose
// communication failed: the seam between the one training loop (trainer.h)
// and the world it runs in.
//
//   FixedWorld (fixed_world.h): one process group for the whole run, each
//   rank's shard from a DistributedSampler; a failure ends the run (the
//   launcher then ends the job, and a checkpoint resumes it).
//   ElasticMembership (elastic_membership.h, --elastic; docs/elastic.md): an
//   elastic::ElasticGroup whose members may die, stop or arrive. Each step
//   is voted before the optimizer applies it; a failed step is discarded,
//   the survivors form the next generation, and the step is taken again on
//   it, over samples re-shared from the epoch's cursor (elastic/epoch_plan.h).
//
// The loop owns the run's Progress, the schedule, evaluation, checkpoints and
// rank 0's lines; a Membership owns the group, the data order and the fate of
// each step.
#ifndef DDPX_EXAMPLES_TRAINER_MEMBERSHIP_H_
#define DDPX_EXAMPLES_TRAINER_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/checkpoint_format.h"
#include "examples/trainer/metrics.h"
#include "examples/trainer/train_step.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

struct TrainConfig;

// This rank's samples for one step (indices into the training set).
struct Batch {
  const int64_t* samples = nullptr;
  int64_t size = 0;
  bool epoch_done = false;  // no step is left in the epoch
};

class Membership {
 public:
  // Told each change of the world on every rank of the new one (the loop
  // prints it on rank 0); an error ends the run.
  using ChangeListener = std::function<absl::Status(const MembershipReport&)>;

  virtual ~Membership() = default;

  // The group of the current world (an elastic run's changes with each
  // generation).
  virtual ProcessGroup& pg() = 0;
  // The start line's world: "4 ranks", "elastic: 4 ranks (generation 0)".
  virtual std::string describe() const = 0;

  // Collective, before the first step. Binds the run's progress and model
  // step for the calls below; may replace `progress` (a process admitted
  // into a running elastic job receives the run's). Refuses settings it
  // cannot serve, naming the flag.
  virtual absl::Status start(const TrainConfig& config, Progress& progress, TrainStep& step,
                             ChangeListener on_change) = 0;
  // For the schedule and the progress lines (an elastic run's: at the
  // world size it started with).
  virtual int64_t steps_per_epoch() const = 0;

  // The epoch's order of samples; then this rank's batch for the next step
  // at the bound progress.
  virtual void begin_epoch(int64_t epoch) = 0;
  virtual Batch next_batch() = 0;
  // Takes one step on `batch` at learning rate `lr`: this rank's loss; or
  // nullopt when the step was discarded on every rank and the world was
  // rebuilt (the loop asks next_batch() again and retakes it); or the error
  // that ends the run.
  virtual absl::StatusOr<std::optional<double>> take_step(const Batch& batch, float lr) = 0;
  // After a committed step has been counted and reported: an elastic run
  // admits waiting processes here.
  virtual absl::Status after_step() { return absl::OkStatus(); }
  virtual void end_epoch() {}
  // A collective outside a step (an evaluation's) failed with `why`: OK
  // when the world was rebuilt and the collective can be taken again, else
  // the error that ends the run.
  virtual absl::Status recover(const absl::Status& why) { return why; }

  // Checkpoints (checkpoint.h), with the progress of the last committed
  // step. A fixed world's are collective (rank 0 commits, every rank
  // writes its hook state); an elastic run's rank 0 writes the job's state
  // alone, which every rank holds the same. resume() is called once, after
  // start(): the checkpoint's progress, or nullopt when there is none (or
  // the process received the run's state from a live rank).
  virtual absl::Status save_checkpoint(const CheckpointOptions& options,
                                       const Progress& progress) = 0;
  virtual absl::StatusOr<std::optional<Progress>> resume(const CheckpointOptions& options) = 0;
  // Whether a run that ends with `error` still holds the state of its last
  // committed step, the same on every rank (an elastic job that fell below
  // its minimum): the loop then writes its last checkpoint before it ends.
  virtual bool ends_with_committed_state(const absl::Status& error) const {
    (void)error;
    return false;
  }

  // What the step and epoch JSON lines add about the world (an elastic
  // run's generation and wall clock).
  virtual void annotate(JsonLine& line) const { (void)line; }
  // Collective, after the last step: a fixed world's ranks leave together.
  virtual absl::Status finish() = 0;
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_MEMBERSHIP_H_
