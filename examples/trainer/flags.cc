#include "examples/trainer/launch_flags.h"

#include <chrono>
#include <cstdlib>
#include <iterator>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "examples/trainer/cli.h"
#include "examples/trainer/init_flags.h"

ABSL_FLAG(int, nproc, 1, "Local ranks to start when not already under a launcher.");
ABSL_FLAG(std::string, init, "env://",
          "Rendezvous: env:// (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, SLURM_*, "
          "OMPI_*), tcp://host:port or file:///path (these two with --rank and "
          "--world_size, or RANK and WORLD_SIZE).");
ABSL_FLAG(int, rank, -1, "This process's rank (-1: from RANK, or launch --nproc local ranks).");
ABSL_FLAG(int, world_size, -1, "Ranks in the job (-1: from WORLD_SIZE).");
ABSL_FLAG(std::string, job_id, "",
          "Job id every rank states at rendezvous, so ranks of another job (or another "
          "world size) are refused: default SLURM_JOB_ID, else TORCHELASTIC_RUN_ID, else "
          "one chosen by the local launch (--nproc).");
ABSL_FLAG(std::string, iface, "",
          "Network interface the ranks bind (e.g. eth0); empty: DDPX_GLOO_SOCKET_IFNAME, "
          "else GLOO_SOCKET_IFNAME, else the host name's address (docs/multi_host.md).");
ABSL_FLAG(std::string, backend, "gloo", "Process-group backend: gloo, nccl, round_robin:gloo*2.");
ABSL_FLAG(std::string, hook, "allreduce",
          "Communication hook spec for the hooks registry, options included "
          "(allreduce, fp16, bf16, powersgd, powersgd:rank=2,start_iter=10, "
          "batched_powersgd, int8, noop, fp16+powersgd, ...).");
ABSL_FLAG(int, timeout_s, 300, "Collective and rendezvous timeout in seconds.");
ABSL_FLAG(int64_t, store_max_memory_mb, -1,
          "Memory limit in MiB of the rendezvous store rank 0 serves (docs/store.md); "
          "-1: the library's default (1 GiB), 0: none.");

namespace ddpx::trainer {

std::optional<int> launch_unless_rank(int argc, char** argv) {
  if (launched_as_rank(absl::GetFlag(FLAGS_rank), absl::GetFlag(FLAGS_init),
                       absl::GetFlag(FLAGS_nproc))) {
    return std::nullopt;
  }
  return launch_local(absl::GetFlag(FLAGS_nproc), absl::GetFlag(FLAGS_job_id), argc, argv);
}

absl::StatusOr<InitOptions> init_options_from_flags() {
  InitOptions init;
  init.backend = absl::GetFlag(FLAGS_backend);
  absl::Status s = resolve_init_flags(
      {absl::GetFlag(FLAGS_init), absl::GetFlag(FLAGS_rank), absl::GetFlag(FLAGS_world_size),
       absl::GetFlag(FLAGS_job_id)},
      [](const char* name) { return getenv(name); }, &init);
  if (!s.ok()) return s;
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (timeout_s <= 0) {
    return absl::InvalidArgumentError("--timeout_s=" + std::to_string(timeout_s) +
                                      ": must be a positive number of seconds");
  }
  init.timeout = std::chrono::seconds(timeout_s);
  const int64_t store_mb = absl::GetFlag(FLAGS_store_max_memory_mb);
  if (store_mb < -1 || store_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError("--store_max_memory_mb=" + std::to_string(store_mb) +
                                      ": must be -1 (default), 0 (none) or a size in MiB");
  }
  if (store_mb >= 0) init.store_max_memory = static_cast<uint64_t>(store_mb) << 20;
  if (const std::string iface = absl::GetFlag(FLAGS_iface); !iface.empty()) {
    setenv("DDPX_GLOO_SOCKET_IFNAME", iface.c_str(), 1);
  }
  return init;
}

JobSettings job_settings_from_flags(const std::string& trainer,
                                    const std::vector<std::string>& model_flags) {
  // The training flags both trainers declare, after the model's own.
  static const char* const kTrainingFlags[] = {
      "backend", "hook", "bucket_cap_mb", "first_bucket_cap_mb", "gradient_as_bucket_view",
      "seed", "lr", "lr_schedule", "momentum", "weight_decay", "batch_size", "epochs",
      "max_steps", "train_limit", "eval_every", "data_dir", "checkpoint_dir",
      "checkpoint_every", "resume", "reset_hook_state"};
  std::vector<std::string> flags = model_flags;
  flags.insert(flags.end(), std::begin(kTrainingFlags), std::end(kTrainingFlags));
  JobSettings settings = {{"trainer", trainer}};
  for (const std::string& name : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    settings.emplace_back(name, flag != nullptr ? flag->CurrentValue() : "(no such flag)");
  }
  return settings;
}

}  // namespace ddpx::trainer
