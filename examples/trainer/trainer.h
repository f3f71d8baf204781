// The one training loop both example trainers run (examples:train's MLP,
// examples/torch:train's libtorch CNN), in a fixed world and in an elastic
// one: epochs, the learning-rate schedule, evaluation, checkpoints and
// resume, rank 0's start, progress, epoch and membership lines and metrics
// JSON lines, and --comm_trace. What is particular to a model sits behind
// TrainStep (train_step.h); who trains, on which samples, and what becomes
// of a failed step behind Membership (membership.h: FixedWorld,
// ElasticMembership).
//
// One loop in one file, so that a change to how a run proceeds (a stop, a
// resume, a change of the world) is made once for both trainers and both
// modes.
#ifndef DDPX_EXAMPLES_TRAINER_TRAINER_H_
#define DDPX_EXAMPLES_TRAINER_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/lr_schedule.h"
#include "examples/trainer/membership.h"
#include "examples/trainer/train_step.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

// The loop's settings (flags.h reads them from the command line).
struct TrainConfig {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank
  float lr = 0.05f;
  // Per-step learning rate over epochs x steps per epoch (or --max_steps when
  // that is fewer): the same curve for every hook.
  LrSchedule lr_schedule = LrSchedule::kConstant;
  uint64_t seed = 0;             // data order (the model's initialization is its own)
  int64_t max_steps = -1;        // stop after this many steps in all (-1: no limit)
  std::string checkpoint_dir;    // empty: no checkpoints
  std::string job_id;            // named in checkpoint_dir/LOCK (checkpoint_lock.h)
  int64_t checkpoint_every = 0;  // also checkpoint every N steps (0: per epoch only)
  int keep_checkpoints = 2;      // complete checkpoints kept on disk
  ResumeMode resume = ResumeMode::kLatest;
  bool reset_hook_state = false;  // resume without the saved hook state
  std::string metrics_out;       // JSON lines (rank 0)
  // Every rank appends {"step", "rank", "spans": [[bucket, enter_ns, done_ns]...],
  // "collectives": [[n, call_ns, done_ns]...]} per step to <comm_trace>.rank<R>
  // (timed_hook.h, timed_backend.h; examples/benchmarks/comm_time.py reads them).
  std::string comm_trace;
  int64_t log_every = 10;        // progress line every N steps (rank 0)
  int64_t eval_every = 0;        // also evaluate every N steps (0: per epoch only)
  std::string hook;              // for the log and metrics
  // The hook's identity in checkpoints: its spec in canonical form (options
  // sorted), or "per_param" for the baseline without a hook.
  std::string hook_identity;
  std::string backend;
  std::string model;             // "mlp", "cnn": the epoch lines' "model"
  int threads = 1;               // per rank, for the start line
};

struct TrainSummary {
  int64_t steps = 0;
  double final_test_accuracy = 0;
  double final_test_loss = 0;
  double wall_seconds = 0;
};

// Trains `step` on every rank of `world` (collective) until the epochs (or
// --max_steps) are done, and ends with world.finish(). Rank 0 of the
// current world prints the start, progress, epoch, evaluation and
// membership lines and writes --metrics_out (appending, so a process that
// becomes rank 0 of an elastic run continues the file).
absl::StatusOr<TrainSummary> train(const TrainConfig& config, Membership& world,
                                   TrainStep& step);
// The same over a FixedWorld of `pg`: every rank returns together.
absl::StatusOr<TrainSummary> train(const TrainConfig& config, std::shared_ptr<ProcessGroup> pg,
                                   TrainStep& step);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_TRAINER_H_
