// Checkpoints a resumed run continues from exactly: rank 0 writes the model,
// the optimizer and the position in the data (state.bin); every rank writes
// its communication-hook state (hook_rank<R>.bin), because PowerSGD's error
// feedback differs per rank. Files are written to a temporary name and
// renamed, so a crash mid-write leaves the previous checkpoint intact.
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/grad_sync.h"

namespace ddpx::trainer {

struct Progress {
  int64_t epoch = 0;          // epoch in progress
  int64_t step_in_epoch = 0;  // batches of that epoch already trained
  int64_t global_step = 0;    // batches trained in all
  double wall_seconds = 0;    // training time before this run (for plots)
  int64_t world_size = 0;     // a checkpoint resumes only at the same size
};

absl::Status save_checkpoint(const std::string& dir, int rank, const Progress& progress,
                             const nn::Mlp& model, const nn::Sgd& optimizer,
                             const GradientSync& sync);

// NotFound when `dir` holds no checkpoint (a fresh run); other errors name
// the file and what did not match.
absl::StatusOr<Progress> load_checkpoint(const std::string& dir, int rank, int world_size,
                                         nn::Mlp& model, nn::Sgd& optimizer,
                                         GradientSync& sync);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_
