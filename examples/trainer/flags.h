// The launch and rendezvous flags both example trainers take
// (examples:train, examples/torch:train), and the first thing their main()
// does with them: start --nproc local ranks, or build this rank's
// InitOptions. Compiled as C++17; the torch trainer (C++20) links it too.
#ifndef DDPX_EXAMPLES_TRAINER_LAUNCH_FLAGS_H_
#define DDPX_EXAMPLES_TRAINER_LAUNCH_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
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

namespace ddpx::trainer {

// When this process is not one rank of a job (cli.h, launched_as_rank):
// runs --nproc local copies of this binary and returns their exit code.
// Otherwise nullopt: the caller trains as one rank.
std::optional<int> launch_unless_rank(int argc, char** argv);

// This rank's InitOptions from --backend, --init, --rank, --world_size,
// --job_id (init_flags.h), --timeout_s and --store_max_memory_mb. Sets
// DDPX_GLOO_SOCKET_IFNAME from --iface, where the Gloo backend and every
// group built later read it. The error names the flag or variable that is missing or malformed.
absl::StatusOr<InitOptions> init_options_from_flags();

// The settings every rank of a job must agree on (InitOptions::job_settings,
// compared at rendezvous): ("trainer", `trainer`), then (name, value) of
// each flag in `model_flags` and of the training flags both trainers
// declare (backend, hook, buckets, seed, learning rate and schedule,
// momentum, weight decay, batch size, steps, data, checkpoints), named as on
// the command line, so a refusal names the flag that differs. Every name
// must be a flag of this binary.
JobSettings job_settings_from_flags(const std::string& trainer,
                                    const std::vector<std::string>& model_flags);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_LAUNCH_FLAGS_H_
