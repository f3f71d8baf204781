#include "examples/trainer/flags.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "examples/trainer/cli.h"
#include "examples/data/fashion_mnist.h"
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

// Elastic mode (docs/elastic.md; elastic_join.h, elastic_membership.h).
ABSL_FLAG(bool, elastic, false,
          "Elastic training (docs/elastic.md): a rank that dies or stops is dropped and the "
          "others go on; processes started later join at a step boundary. The store is "
          "served by the launcher (--nproc) or tcp_store_server, never by a rank.");
ABSL_FLAG(int, min_nproc, 1, "--elastic: below this many live ranks the job ends.");
ABSL_FLAG(int, max_restarts, 0,
          "--elastic with --nproc: replacements the launcher starts for failed ranks, in all.");
ABSL_FLAG(double, heartbeat_s, 0.5,
          "--elastic: heartbeat interval; a rank silent for 4 intervals is dropped.");

ABSL_FLAG(std::string, trace_dir, "",
          "Flight recorder dumps go here, one rank<R>.jsonl per rank (sets DDPX_TRACE_DIR): "
          "when an op fails, on SIGUSR1, and when another rank's op failed. "
          "tools/trace_analyze DIR names the culprit.");

// Training. The four whose default depends on the model are set per binary
// (ModelDefaults, from each main()); the values here are examples:train's.
ABSL_FLAG(int64_t, epochs, 1, "Epochs over the training set (default per trainer).");
ABSL_FLAG(int64_t, batch_size, 64, "Samples per rank per step.");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate (default per trainer).");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "constant, or cosine: lr decays per step to 0 at the end of --epochs (or "
          "--max_steps) (default per trainer).");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(double, weight_decay, 0.0, "SGD weight decay (L2).");
ABSL_FLAG(double, bucket_cap_mb, 25.0, "DDP bucket size cap in MiB.");
ABSL_FLAG(double, first_bucket_cap_mb, 1.0,
          "Cap of DDP's first bucket in MiB (small so communication starts early).");
ABSL_FLAG(bool, gradient_as_bucket_view, true,
          "Gradients live inside DDP's bucket buffers (no copy into the bucket and back each "
          "step); torch's option of the same name, off by default there (default per "
          "trainer).");
ABSL_FLAG(uint64_t, seed, 0, "Seed for initialization and data order.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Save model, optimizer and DDP/hook state here each epoch and at the end; resume "
          "from it when it holds a checkpoint.");
ABSL_FLAG(int64_t, checkpoint_every, 0, "Also checkpoint every N steps (0: off).");
ABSL_FLAG(int, keep_checkpoints, 2, "Complete checkpoints kept in --checkpoint_dir.");
ABSL_FLAG(std::string, resume, "latest",
          "latest: resume from the checkpoint --checkpoint_dir/latest names and refuse it "
          "if it does not validate; auto: fall back to the newest older complete checkpoint "
          "that validates, with a warning saying why.");
ABSL_FLAG(bool, reset_hook_state, false,
          "Resume without the checkpoint's hook state (the hook starts afresh); needed to "
          "resume with another --hook.");
ABSL_FLAG(std::string, metrics_out, "", "Append JSON lines (per step, per epoch) here.");
ABSL_FLAG(int64_t, max_steps, -1, "Stop after this many steps in all (-1: no limit).");
ABSL_FLAG(int64_t, train_limit, -1, "Train on the first N images only (-1: all).");
ABSL_FLAG(int64_t, log_every, 10, "Progress line every N steps.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Also measure test accuracy every N steps (0: at the end of each epoch only).");
ABSL_FLAG(std::string, data_dir, ddpx::data::kDefaultFashionMnistDir,
          "Folder holding Fashion-MNIST's IDX .gz files.");
ABSL_FLAG(int, threads, 0,
          "Compute threads per rank: OpenBLAS's, and torch's in examples/torch:train "
          "(0: cores / local ranks).");

namespace ddpx::trainer {

bool elastic_mode() { return absl::GetFlag(FLAGS_elastic); }

void set_model_defaults(const ModelDefaults& d) {
  absl::SetFlag(&FLAGS_epochs, d.epochs);
  absl::SetFlag(&FLAGS_lr, d.lr);
  absl::SetFlag(&FLAGS_lr_schedule, d.lr_schedule);
  absl::SetFlag(&FLAGS_gradient_as_bucket_view, d.gradient_as_bucket_view);
}

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
  if (const std::string dir = absl::GetFlag(FLAGS_trace_dir); !dir.empty()) {
    setenv("DDPX_TRACE_DIR", dir.c_str(), 1);  // read by init_process_group
  }
  return init;
}

JobSettings job_settings_from_flags(const std::string& trainer,
                                    const std::vector<std::string>& model_flags) {
  // The training flags of this file, after the model's own.
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

absl::StatusOr<TrainerFlags> trainer_flags(const InitOptions& init, const std::string& sync,
                                           const std::string& model) {
  TrainerFlags f;
  TrainConfig& c = f.loop;
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.batch_size = absl::GetFlag(FLAGS_batch_size);
  if (c.batch_size <= 0) {
    return absl::InvalidArgumentError("--batch_size=" + std::to_string(c.batch_size) +
                                      ": must be positive");
  }
  c.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  absl::StatusOr<LrSchedule> schedule = parse_lr_schedule(absl::GetFlag(FLAGS_lr_schedule));
  if (!schedule.ok()) return schedule.status();
  c.lr_schedule = *schedule;
  c.seed = absl::GetFlag(FLAGS_seed);
  c.max_steps = absl::GetFlag(FLAGS_max_steps);
  c.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  c.job_id = init.job_id;
  c.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  c.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  if (c.keep_checkpoints < 1) {
    return absl::InvalidArgumentError("--keep_checkpoints=" +
                                      std::to_string(c.keep_checkpoints) + ": keep at least 1");
  }
  absl::StatusOr<ResumeMode> resume = parse_resume_mode(absl::GetFlag(FLAGS_resume));
  if (!resume.ok()) return resume.status();
  c.resume = *resume;
  c.reset_hook_state = absl::GetFlag(FLAGS_reset_hook_state);
  c.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  c.log_every = absl::GetFlag(FLAGS_log_every);
  c.eval_every = absl::GetFlag(FLAGS_eval_every);
  c.hook = absl::GetFlag(FLAGS_hook);
  absl::StatusOr<std::string> identity = hook_identity(sync, c.hook);
  if (!identity.ok()) return identity.status();
  c.hook_identity = *identity;
  c.backend = init.backend;
  c.model = model;

  f.data_dir = absl::GetFlag(FLAGS_data_dir);
  f.train_limit = absl::GetFlag(FLAGS_train_limit);
  f.seed = c.seed;
  f.momentum = static_cast<float>(absl::GetFlag(FLAGS_momentum));
  f.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  f.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  f.first_bucket_cap_mb = absl::GetFlag(FLAGS_first_bucket_cap_mb);
  f.gradient_as_bucket_view = absl::GetFlag(FLAGS_gradient_as_bucket_view);
  f.threads = absl::GetFlag(FLAGS_threads);
  if (f.threads <= 0) {
    f.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                local_world_size());
  }
  c.threads = f.threads;
  return f;
}

}  // namespace ddpx::trainer
