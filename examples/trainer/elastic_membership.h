// The membership of an elastic run (membership.h; --elastic,
// docs/elastic.md): an elastic::ElasticGroup whose members may die, stop
// or arrive while the loop (trainer.h) runs.
//
// Each step is voted (ElasticGroup::should_commit, through the model
// step's commit gate, train_step.h) between the gradients' synchronization
// and the optimizer step, so a step commits on every live rank or on none.
// A failed step is discarded (the parameters and the optimizer were not
// touched, the data cursor did not move), the survivors form the next
// generation, the gradient synchronization is rebuilt over its group, and
// the loop takes the same step again, over the samples the new world size
// gives each rank from the epoch's cursor (elastic/epoch_plan.h). Processes
// admitted into a generation get the run's state from its rank 0 over the
// group (elastic_state.h). Every change is told to the loop, whose rank 0
// prints it and writes a {"type":"membership",...} line.
#ifndef DDPX_EXAMPLES_TRAINER_ELASTIC_MEMBERSHIP_H_
#define DDPX_EXAMPLES_TRAINER_ELASTIC_MEMBERSHIP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elastic/elastic_group.h"
#include "elastic/epoch_plan.h"
#include "examples/trainer/membership.h"

namespace ddpx::trainer {

class ElasticMembership : public Membership {
 public:
  explicit ElasticMembership(elastic::ElasticGroup& group) : group_(group) {}

  ProcessGroup& pg() override { return *group_.pg(); }
  std::string describe() const override;
  // Builds the first generation's gradient synchronization; a newcomer
  // receives the state here. Errors: the group fell below its minimum
  // (FailedPrecondition naming it), this process was refused, or the store
  // is gone.
  absl::Status start(const TrainConfig& config, Progress& progress, TrainStep& step,
                     ChangeListener on_change) override;
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void begin_epoch(int64_t epoch) override;
  Batch next_batch() override;
  // `batch` is the last next_batch()'s.
  absl::StatusOr<std::optional<double>> take_step(const Batch& batch, float lr) override;
  // The vote asked to admit waiting processes: the next generation forms.
  absl::Status after_step() override;
  void end_epoch() override { consumed_ = 0; }
  absl::Status recover(const absl::Status& why) override { return rebuild(why, 0); }
  // "generation", and "unix_ms" (rank 0 is not always the same process).
  void annotate(JsonLine& line) const override;
  absl::Status finish() override { return absl::OkStatus(); }
  // Rank 0 of the generation writes the job's state (elastic_state.h: the
  // position, model and optimizer) as a single-writer checkpoint
  // (checkpoint.h); the other ranks write nothing. After the job fell
  // below its minimum every survivor tries, and the folder's LOCK lets one
  // write (rank 0 may be the rank that died). A LOCK held by another
  // process (a former rank 0 that was stopped and left out) skips the
  // checkpoint with a warning; the next one is tried again.
  absl::Status save_checkpoint(const CheckpointOptions& options,
                               const Progress& progress) override;
  // Rank 0 of the first generation reads the checkpoint and sends it to
  // every rank over the group (as to a newcomer); a member lost meanwhile
  // makes the next generation take it again. Nothing for a process that
  // received the running job's state when it was admitted.
  absl::StatusOr<std::optional<Progress>> resume(const CheckpointOptions& options) override;
  // The job fell below --min_nproc: the step that failed was discarded, so
  // the state is the last committed step's.
  bool ends_with_committed_state(const absl::Status& error) const override;

 private:
  // A generation's start: the gradient synchronization over its group,
  // then the state to newcomers.
  absl::Status start_generation();
  // After a failed step or collective (or for an admission: `why` OK): the
  // next generation, formed again until one starts. `steps_lost` were
  // discarded by the failure.
  absl::Status rebuild(absl::Status why, int64_t steps_lost);
  // hook_state_ = the gradient synchronization's hook state.
  absl::Status snapshot_hook_state();
  // Loads `hook_state` (another rank's), drops its rank-local part
  // (GradientSync::drop_local_hook_state) and snapshots it.
  absl::Status adopt_hook_state(const std::string& hook_state);
  // The commit gate: this rank's vote on the step under way.
  absl::StatusOr<bool> vote(const absl::Status& synced);

  elastic::ElasticGroup& group_;
  int64_t train_size_ = 0;
  int64_t batch_size_ = 1;
  uint64_t seed_ = 0;
  int64_t steps_per_epoch_ = 1;
  Progress* progress_ = nullptr;
  TrainStep* step_ = nullptr;
  ChangeListener on_change_;

  std::vector<int64_t> order_;  // the epoch's permutation, the same on every rank
  int64_t consumed_ = 0;        // its samples that committed steps trained on
  elastic::StepSlice slice_;    // the step under way

  // The vote on the step under way.
  bool voted_ = false;
  absl::Status vote_error_;  // the store is gone
  elastic::CommitDecision decision_;

  bool received_state_ = false;  // admitted into a running job
  // This rank's hook state (PowerSGD's error feedback, Qs, iteration) at
  // its last committed step: loaded into each generation's new gradient
  // synchronization, so a discarded step leaves no trace in it and every
  // rank's iteration is the job's; rank 0's is sent to newcomers and
  // checkpointed.
  std::string hook_state_;
  bool own_hook_state_ = false;  // hook_state_ is this process's, not still to come
  bool below_minimum_ = false;   // reform() ended the job
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_ELASTIC_MEMBERSHIP_H_
