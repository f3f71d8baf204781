// What the training loop (trainer.h) asks of a model: one synchronized step
// on a batch, an evaluation of part of the test set, and the state a
// checkpoint saves. examples:train's MLP (mlp_step.h) and
// examples/torch:train's libtorch CNN implement it; the loop owns
// everything else (epochs, sharding, schedule, checkpoints, progress and
// metrics lines), once for both.
#ifndef DDPX_EXAMPLES_TRAINER_TRAIN_STEP_H_
#define DDPX_EXAMPLES_TRAINER_TRAIN_STEP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/trainer/checkpoint_format.h"
#include "examples/trainer/grad_sync.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

// A slice of the test set: predictions that were right, and the summed loss.
struct EvalCounts {
  double correct = 0;
  double loss_sum = 0;
};

class TrainStep {
 public:
  virtual ~TrainStep() = default;
  // "MLP 784-2048-2048-10", "ResidualCNN(width 16)": the start line names it.
  virtual std::string describe() const = 0;
  virtual int64_t num_parameters() const = 0;
  virtual int64_t train_size() const = 0;  // samples in the training set
  virtual int64_t test_size() const = 0;
  // One step on the training samples samples[0..batch): forward, backward
  // with the gradients averaged across ranks (sync()), then the optimizer
  // at learning rate `lr`. Returns this rank's mean loss over the batch.
  virtual absl::StatusOr<double> step(const int64_t* samples, int64_t batch, float lr) = 0;
  // Test samples [begin, end), without training.
  virtual absl::StatusOr<EvalCounts> evaluate(int64_t begin, int64_t end) = 0;
  // Model and optimizer, as checkpoints save and resume them.
  virtual TrainState& state() = 0;
  // The gradient synchronization: its step statistics and hook state.
  virtual GradientSync& sync() = 0;

  // Elastic training (elastic_membership.h). Asked between the gradients'
  // synchronization and the optimizer step, with the synchronization's
  // outcome: true applies the step, false skips it (step() then returns
  // Aborted), an error is returned as is. Unset: a failed synchronization
  // is returned and a good one applied.
  using CommitGate = std::function<absl::StatusOr<bool>(const absl::Status& synced)>;
  void set_commit_gate(CommitGate gate) { commit_gate_ = std::move(gate); }
  // Builds the gradient synchronization anew over `pg` (a new generation's
  // group; collective over it) and returns the one it replaces (null if
  // none), for the caller to release where a wait does not matter.
  virtual absl::StatusOr<std::unique_ptr<GradientSync>> reset_sync(
      std::shared_ptr<ProcessGroup> pg) {
    (void)pg;
    return absl::UnimplementedError("this model cannot rebuild its gradient synchronization");
  }

 protected:
  // What step() does between finish() and the optimizer: the gate's answer.
  absl::StatusOr<bool> commit(const absl::Status& synced) {
    if (!commit_gate_) {
      if (!synced.ok()) return synced;
      return true;
    }
    return commit_gate_(synced);
  }

 private:
  CommitGate commit_gate_;
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_TRAIN_STEP_H_
