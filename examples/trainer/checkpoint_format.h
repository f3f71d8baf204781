// The two kinds of checkpoint file and their versioned binary headers.
//
//   state.bin (rank 0): "DDPXSTAT" | u32 version | i64 global_step | i64 epoch |
//     i64 step_in_epoch | i64 steps_per_epoch | i64 world_size |
//     f64 wall_seconds | f64 epoch_loss_sum | i64 epoch_loss_count |
//     model | optimizer (TrainState: nn::Mlp::save, nn::Sgd::save_state for
//     the MLP trainer)
//   hook_rank<R>.bin (every rank): "DDPXHOOK" | u32 version | i64 step |
//     i64 rank | i64 world_size | u64 length + bytes: hook spec |
//     i64 hook_start_step | i64 hook_iteration | the hook's own state bytes
//
// All integers and floats little-endian. Decoding checks every header field
// against what the resuming run expects; an error is one line naming the
// file, the field, its value and the range or value it should have had.
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_FORMAT_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/grad_sync.h"

namespace ddpx::trainer {

// Where training stands; everything a resumed run needs besides the model,
// optimizer and hook state.
struct Progress {
  int64_t epoch = 0;          // epoch in progress
  int64_t step_in_epoch = 0;  // batches of that epoch already trained
  int64_t global_step = 0;    // batches trained in all
  int64_t steps_per_epoch = 0;
  int64_t world_size = 0;     // a checkpoint resumes only at the same size
  double wall_seconds = 0;    // training time before this run (for plots)
  // The running sum and count of rank 0's batch losses in the epoch in
  // progress, so the epoch's train_loss after a resume equals an
  // uninterrupted run's.
  double epoch_loss_sum = 0;
  int64_t epoch_loss_count = 0;
  // The step at which the hook state began: 0, or the step of a resume that
  // dropped the saved hook state (--reset_hook_state). A hook's iteration
  // counter is then global_step - hook_start_step.
  int64_t hook_start_step = 0;
};

// What the resuming run expects of a checkpoint; a field outside it refuses
// the checkpoint.
struct CheckpointExpectations {
  int64_t step = 0;  // the manifest's step
  int rank = 0;
  int64_t world_size = 0;
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  std::string hook;  // this run's hook spec (canonical form)
};

// What state.bin carries after its header: the model, then the optimizer.
// The MLP trainer's is MlpTrainState; examples/torch's keeps a libtorch
// module and optimizer. A load must consume exactly what the save wrote.
class TrainState {
 public:
  virtual ~TrainState() = default;
  virtual absl::Status save_model(std::ostream& out) const = 0;
  virtual absl::Status save_optimizer(std::ostream& out) const = 0;
  virtual absl::Status load_model(std::istream& in) = 0;
  virtual absl::Status load_optimizer(std::istream& in) = 0;
};

// nn::Mlp::save/load and nn::Sgd::save_state/load_state.
class MlpTrainState : public TrainState {
 public:
  MlpTrainState(const nn::Mlp& model, const nn::Sgd& optimizer)
      : model_(&model), optimizer_(&optimizer) {}
  MlpTrainState(nn::Mlp& model, nn::Sgd& optimizer)
      : model_(&model), optimizer_(&optimizer), mutable_model_(&model),
        mutable_optimizer_(&optimizer) {}
  absl::Status save_model(std::ostream& out) const override { return model_->save(out); }
  absl::Status save_optimizer(std::ostream& out) const override {
    return optimizer_->save_state(out);
  }
  absl::Status load_model(std::istream& in) override;
  absl::Status load_optimizer(std::istream& in) override;

 private:
  const nn::Mlp* model_;
  const nn::Sgd* optimizer_;
  nn::Mlp* mutable_model_ = nullptr;
  nn::Sgd* mutable_optimizer_ = nullptr;
};

inline constexpr char kStateFile[] = "state.bin";
std::string hook_file_name(int rank);  // "hook_rank<R>.bin"

absl::StatusOr<std::string> encode_state_file(const Progress& progress, const TrainState& state);
absl::StatusOr<std::string> encode_state_file(const Progress& progress, const nn::Mlp& model,
                                              const nn::Sgd& optimizer);
absl::StatusOr<std::string> encode_hook_file(const Progress& progress, int rank,
                                             const std::string& hook,
                                             const GradientSync& sync);

// Checks the header of `contents` (the file at `path`) and loads the model
// and optimizer. Returns the progress (hook_start_step still 0).
absl::StatusOr<Progress> decode_state_file(const std::string& path, absl::string_view contents,
                                           const CheckpointExpectations& expect,
                                           TrainState& state);
absl::StatusOr<Progress> decode_state_file(const std::string& path, absl::string_view contents,
                                           const CheckpointExpectations& expect,
                                           nn::Mlp& model, nn::Sgd& optimizer);

struct HookFileHeader {
  int64_t step = 0;
  int64_t rank = 0;
  int64_t world_size = 0;
  std::string hook;
  int64_t hook_start_step = 0;
  int64_t hook_iteration = -1;  // -1: the hook keeps no iteration counter
};

// Checks the header (a different hook is refused, naming both specs and
// --reset_hook_state), loads the hook state into `sync` and checks that the
// loaded state's iteration is the header's.
absl::StatusOr<HookFileHeader> decode_hook_file(const std::string& path,
                                                absl::string_view contents,
                                                const CheckpointExpectations& expect,
                                                GradientSync& sync);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_FORMAT_H_
