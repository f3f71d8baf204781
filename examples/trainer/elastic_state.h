// The training state rank 0 of an elastic generation sends to the
// processes it admitted (elastic/state_transfer.h carries the bytes): the
// run's progress, the epoch's data cursor (elastic/epoch_plan.h), the model,
// the optimizer and the communication hook's state. The same bytes are an elastic job's checkpoint
// (kElasticStateFile), so a whole-job restart resumes from them.
#ifndef DDPX_EXAMPLES_TRAINER_ELASTIC_STATE_H_
#define DDPX_EXAMPLES_TRAINER_ELASTIC_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "examples/trainer/checkpoint_format.h"

namespace ddpx::trainer {

// The file of an elastic job's checkpoint: what save_elastic_state
// returns, written by one rank (checkpoint.h's single-writer checkpoint).
inline constexpr char kElasticStateFile[] = "elastic_state.bin";

// Where a run stands, the same on every member after every committed step.
struct ElasticPosition {
  Progress progress;
  int64_t consumed = 0;  // samples of the epoch's permutation trained on
};

// `hook_state`: the sender's communication-hook state at its last
// committed step (GradientSync::save_state), carried as bytes.
absl::StatusOr<std::string> save_elastic_state(const ElasticPosition& position,
                                               const TrainState& state,
                                               const std::string& hook_state = "");
// DataLoss naming what is wrong when `blob` is not one save_elastic_state
// wrote (a different magic, cut short, bytes left over). The hook state's
// bytes go to `hook_state` unless it is null.
absl::Status load_elastic_state(const std::string& blob, ElasticPosition* position,
                                TrainState& state, std::string* hook_state = nullptr);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_ELASTIC_STATE_H_
