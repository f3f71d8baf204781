// The flags both example trainers take (examples:train, examples/torch:train),
// elastic mode's included, and what their main()s do with them first: start --nproc local ranks, or
// build this rank's InitOptions; then the loop's TrainConfig (trainer.h) and
// the settings every model reads (data, optimizer, DDP buckets, threads).
// A trainer declares only its model's own flags (--hidden, --width, ...).
// Compiled as C++17; the torch trainer (C++20) links it too.
#ifndef DDPX_EXAMPLES_TRAINER_FLAGS_H_
#define DDPX_EXAMPLES_TRAINER_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "examples/trainer/trainer.h"
#include "process_group/rendezvous/init.h"

ABSL_DECLARE_FLAG(int, nproc);
ABSL_DECLARE_FLAG(std::string, init);
ABSL_DECLARE_FLAG(int, rank);
ABSL_DECLARE_FLAG(int, world_size);
ABSL_DECLARE_FLAG(std::string, job_id);
ABSL_DECLARE_FLAG(std::string, iface);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, hook);
ABSL_DECLARE_FLAG(int, timeout_s);
ABSL_DECLARE_FLAG(int64_t, store_max_memory_mb);
ABSL_DECLARE_FLAG(std::string, trace_dir);
ABSL_DECLARE_FLAG(bool, elastic);
ABSL_DECLARE_FLAG(int, min_nproc);
ABSL_DECLARE_FLAG(int, max_restarts);
ABSL_DECLARE_FLAG(double, heartbeat_s);

namespace ddpx::trainer {

// The defaults that differ between the trainers because their models do
// (each main() says why for its own); every other flag has one default.
struct ModelDefaults {
  int64_t epochs = 1;
  double lr = 0.05;
  std::string lr_schedule = "constant";
  bool gradient_as_bucket_view = true;
};
// Sets those flags' values; call before absl::ParseCommandLine, which then
// overrides them from the command line.
void set_model_defaults(const ModelDefaults& defaults);

// --elastic: the run goes on when ranks die, stop or arrive
// (elastic_join.h launches or joins the job, elastic_membership.h drives
// the loop).
bool elastic_mode();

// When this process is not one rank of a job (cli.h, launched_as_rank):
// runs --nproc local copies of this binary and returns their exit code.
// Otherwise nullopt: the caller trains as one rank.
std::optional<int> launch_unless_rank(int argc, char** argv);

// This rank's InitOptions from --backend, --init, --rank, --world_size,
// --job_id (init_flags.h), --timeout_s and --store_max_memory_mb. Sets
// DDPX_GLOO_SOCKET_IFNAME from --iface and DDPX_TRACE_DIR from --trace_dir,
// where the Gloo backend, the flight recorder and every group built later
// read them. The error names the flag or variable that is missing or
// malformed.
absl::StatusOr<InitOptions> init_options_from_flags();

// The settings every rank of a job must agree on (InitOptions::job_settings,
// compared at rendezvous): ("trainer", `trainer`), then (name, value) of
// each flag in `model_flags` and of the training flags of this file
// (backend, hook, buckets, seed, learning rate and schedule, momentum,
// weight decay, batch size, steps, data, checkpoints), named as on the
// command line, so a refusal names the flag that differs. Every name must be
// a flag of this binary.
JobSettings job_settings_from_flags(const std::string& trainer,
                                    const std::vector<std::string>& model_flags);

// What the flags of this file say beyond the launch, read and checked once.
struct TrainerFlags {
  TrainConfig loop;
  std::string data_dir;
  int64_t train_limit = -1;  // the first N training images only (-1: all)
  uint64_t seed = 0;         // the model's initialization (and the loop's data order)
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  bool gradient_as_bucket_view = true;
  int threads = 1;           // --threads, 0 resolved to cores / local ranks
};
// `sync` is "ddp" or "per_param" (the hook's identity in checkpoints,
// cli.h); `model` names the model in the epoch lines. The error names the
// flag.
absl::StatusOr<TrainerFlags> trainer_flags(const InitOptions& init, const std::string& sync,
                                           const std::string& model);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_FLAGS_H_
