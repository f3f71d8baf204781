// The training loop of examples/train: an MLP on Fashion-MNIST, data
// parallel over the ranks of a process group.
#ifndef DDPX_EXAMPLES_TRAINER_TRAINER_H_
#define DDPX_EXAMPLES_TRAINER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/nn/mlp.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/lr_schedule.h"
#include "examples/trainer/grad_sync.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

struct TrainConfig {
  std::string data_dir;
  std::vector<int64_t> hidden = {2048, 2048};
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank
  float lr = 0.05f;
  // Per-step learning rate over epochs x steps per epoch (or --max_steps when
  // that is fewer): the same curve for every hook.
  LrSchedule lr_schedule = LrSchedule::kConstant;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  uint64_t seed = 0;
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
  int64_t train_limit = -1;      // use only the first N training samples (-1: all)
  std::string hook;              // for the log and metrics
  // The hook's identity in checkpoints: its spec in canonical form (options
  // sorted), or "per_param" for the baseline without a hook.
  std::string hook_identity;
  std::string backend;
};

// Builds the gradient synchronization for a model (DDP + hook, or the
// per-parameter baseline), after the model exists and before training.
using SyncFactory = std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(
    nn::Mlp& model, std::shared_ptr<ProcessGroup> pg)>;

struct TrainSummary {
  int64_t steps = 0;
  double final_test_accuracy = 0;
  double final_test_loss = 0;
  double wall_seconds = 0;
};

absl::StatusOr<TrainSummary> train(const TrainConfig& config,
                                   std::shared_ptr<ProcessGroup> pg,
                                   const SyncFactory& make_sync);

// "2048,2048" -> {2048, 2048}; "" -> {} (a linear model). Errors name the
// bad element.
absl::StatusOr<std::vector<int64_t>> parse_hidden(const std::string& text);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_TRAINER_H_
