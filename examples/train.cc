// examples/train: data-parallel training of an MLP on Fashion-MNIST.
//
//   bazel run //examples:train -- --nproc=4 --backend=gloo --hook=powersgd
//   srun -n 4 .bazel/bin/examples/train --init=env://
//   torchrun --no-python --nproc-per-node=2 .bazel/bin/examples/train --init=env://
//   train --init=tcp://10.0.0.1:29500 --rank=1 --world_size=2 --job_id=exp7
//
// Without a launcher's environment (RANK, SLURM_PROCID or
// OMPI_COMM_WORLD_RANK unset) and without --rank the binary starts --nproc
// copies of itself as local ranks (examples/launcher) and supervises them;
// each copy, seeing RANK, trains as one rank.
#include <cblas.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "examples/data/fashion_mnist.h"
#include "examples/trainer/cli.h"
#include "examples/trainer/ddp_sync.h"
#include "examples/trainer/fault_injection.h"
#include "examples/trainer/launch_flags.h"
#include "examples/trainer/pg_allreduce_sync.h"
#include "examples/trainer/trainer.h"
#include "hooks/registry.h"
#include "process_group/rendezvous/init.h"

ABSL_FLAG(std::string, sync, "ddp",
          "ddp: DistributedDataParallel with --hook; per_param: one allreduce per "
          "parameter on the process group (baseline without buckets or hooks).");
ABSL_FLAG(int64_t, epochs, 1, "Epochs over the training set.");
ABSL_FLAG(int64_t, batch_size, 64, "Samples per rank per step.");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate.");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "constant, or cosine: lr decays per step to 0 at the end of --epochs.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(double, weight_decay, 0.0, "SGD weight decay (L2).");
ABSL_FLAG(std::string, hidden, "2048,2048", "Hidden layer widths, comma separated.");
ABSL_FLAG(double, bucket_cap_mb, 25.0, "DDP bucket size cap in MiB.");
ABSL_FLAG(double, first_bucket_cap_mb, 1.0,
          "Cap of DDP's first bucket in MiB (small so communication starts early).");
ABSL_FLAG(bool, gradient_as_bucket_view, true,
          "Gradients live inside DDP's bucket buffers (no copy into the bucket and "
          "back each step); torch's option of the same name, off by default there.");
ABSL_FLAG(uint64_t, seed, 0, "Seed for initialization and data order.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Save model, optimizer and hook state here each epoch and at the end; "
          "resume from it when it holds a checkpoint.");
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
ABSL_FLAG(std::string, comm_trace, "",
          "Every rank appends per-step communication spans (hook entered/completed, "
          "CLOCK_MONOTONIC) to <path>.rank<R>; examples/benchmarks/comm_time.py reads them.");
ABSL_FLAG(int64_t, max_steps, -1, "Stop after this many steps in all (-1: no limit).");
ABSL_FLAG(int64_t, train_limit, -1, "Train on the first N images only (-1: all).");
ABSL_FLAG(int64_t, log_every, 10, "Progress line every N steps.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Also measure test accuracy every N steps (0: at the end of each epoch only).");
ABSL_FLAG(std::string, data_dir, ddpx::data::kDefaultFashionMnistDir,
          "Folder holding Fashion-MNIST's IDX .gz files.");
ABSL_FLAG(int, blas_threads, 0, "OpenBLAS threads per rank (0: cores / local ranks).");
ABSL_FLAG(std::string, trace_dir, "",
          "Flight recorder dumps go here, one rank<R>.jsonl per rank (sets DDPX_TRACE_DIR): "
          "when an op fails, on SIGUSR1, and when another rank's op failed. "
          "tools/trace_analyze DIR names the culprit.");
ABSL_FLAG(std::string, inject_fault, "",
          "FAULT INJECTION, for tests only: rank --inject_fault_rank misbehaves at step "
          "--inject_fault_at: skip_allreduce, wrong_count, wrong_root, sigstop, sigkill "
          "(examples/trainer/fault_injection.h).");
ABSL_FLAG(int, inject_fault_rank, 1, "FAULT INJECTION: the rank that misbehaves.");
ABSL_FLAG(int64_t, inject_fault_at, 2, "FAULT INJECTION: the step it happens at.");

namespace {

ddpx::trainer::SyncFactory sync_factory(const std::string& kind, const std::string& hook_spec,
                                        ddpx::DDPOptions options, bool time_collectives,
                                        ddpx::trainer::InjectedFault fault) {
  return [=](ddpx::nn::Mlp& model, std::shared_ptr<ddpx::ProcessGroup> pg)
             -> absl::StatusOr<std::unique_ptr<ddpx::trainer::GradientSync>> {
    if (kind == "per_param") {
      return ddpx::trainer::make_per_parameter_allreduce(model.parameters(), std::move(pg));
    }
    if (kind != "ddp") {
      return absl::InvalidArgumentError("--sync=" + kind + ": expected ddp or per_param");
    }
    // --comm_trace: DDP and the hook talk through a backend that stamps
    // every collective (examples/trainer/timed_backend.h).
    std::shared_ptr<ddpx::trainer::TimedBackend> timed;
    if (time_collectives) pg = ddpx::trainer::TimedBackend::wrap(*pg, &timed);
    absl::StatusOr<std::unique_ptr<ddpx::CommHook>> hook = ddpx::make_comm_hook(hook_spec, pg);
    if (!hook.ok()) return hook.status();
    if (!fault.kind.empty()) *hook = ddpx::trainer::inject_fault(std::move(*hook), fault, pg);
    return ddpx::trainer::make_ddp_sync(model.parameters(), std::move(pg), options,
                                        std::move(*hook), std::move(timed));
  };
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Data-parallel MLP training on Fashion-MNIST.\n"
      "  train --nproc=4 --backend=gloo --hook=powersgd\n"
      "  srun -n 4 train --init=env://");
  absl::ParseCommandLine(argc, argv);
  if (std::optional<int> launched = ddpx::trainer::launch_unless_rank(argc, argv)) {
    return *launched;
  }

  int blas_threads = absl::GetFlag(FLAGS_blas_threads);
  if (blas_threads <= 0) {
    blas_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                   ddpx::trainer::local_world_size());
  }
  openblas_set_num_threads(blas_threads);

  absl::StatusOr<ddpx::InitOptions> init_or = ddpx::trainer::init_options_from_flags();
  if (!init_or.ok()) {
    fprintf(stderr, "train: %s\n", std::string(init_or.status().message()).c_str());
    return 2;
  }
  ddpx::InitOptions init = *std::move(init_or);
  // What every rank must agree on, refused at rendezvous naming the flag.
  init.job_settings =
      ddpx::trainer::job_settings_from_flags("examples/train", {"hidden", "sync"});
  if (const std::string dir = absl::GetFlag(FLAGS_trace_dir); !dir.empty()) {
    setenv("DDPX_TRACE_DIR", dir.c_str(), 1);  // read by init_process_group
  }
  ddpx::trainer::InjectedFault fault{absl::GetFlag(FLAGS_inject_fault),
                                     absl::GetFlag(FLAGS_inject_fault_rank),
                                     absl::GetFlag(FLAGS_inject_fault_at)};
  if (absl::Status s = ddpx::trainer::check_fault_kind(fault.kind); !s.ok()) {
    fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> pg = ddpx::init_process_group(init);
  if (!pg.ok()) {
    fprintf(stderr, "train: init_process_group(%s, %s) failed: %s\n", init.backend.c_str(),
            init.init_method.c_str(), pg.status().ToString().c_str());
    return 1;
  }

  ddpx::trainer::TrainConfig config;
  absl::StatusOr<std::vector<int64_t>> hidden =
      ddpx::trainer::parse_hidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) {
    fprintf(stderr, "train: %s\n", hidden.status().ToString().c_str());
    return 2;
  }
  config.hidden = *hidden;
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  config.epochs = absl::GetFlag(FLAGS_epochs);
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  absl::StatusOr<ddpx::trainer::LrSchedule> schedule =
      ddpx::trainer::parse_lr_schedule(absl::GetFlag(FLAGS_lr_schedule));
  if (!schedule.ok()) {
    fprintf(stderr, "train: %s\n", schedule.status().ToString().c_str());
    return 2;
  }
  config.lr_schedule = *schedule;
  config.momentum = static_cast<float>(absl::GetFlag(FLAGS_momentum));
  config.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  config.seed = absl::GetFlag(FLAGS_seed);
  config.max_steps = absl::GetFlag(FLAGS_max_steps);
  config.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  config.job_id = init.job_id;
  config.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  config.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  config.comm_trace = absl::GetFlag(FLAGS_comm_trace);
  config.log_every = absl::GetFlag(FLAGS_log_every);
  config.eval_every = absl::GetFlag(FLAGS_eval_every);
  config.train_limit = absl::GetFlag(FLAGS_train_limit);
  config.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  if (config.keep_checkpoints < 1) {
    fprintf(stderr, "train: --keep_checkpoints=%d: keep at least 1\n", config.keep_checkpoints);
    return 2;
  }
  absl::StatusOr<ddpx::trainer::ResumeMode> resume =
      ddpx::trainer::parse_resume_mode(absl::GetFlag(FLAGS_resume));
  if (!resume.ok()) {
    fprintf(stderr, "train: %s\n", std::string(resume.status().message()).c_str());
    return 2;
  }
  config.resume = *resume;
  config.reset_hook_state = absl::GetFlag(FLAGS_reset_hook_state);
  config.hook = absl::GetFlag(FLAGS_hook);
  absl::StatusOr<std::string> identity =
      ddpx::trainer::hook_identity(absl::GetFlag(FLAGS_sync), config.hook);
  if (!identity.ok()) {
    fprintf(stderr, "train: %s\n", std::string(identity.status().message()).c_str());
    return 2;
  }
  config.hook_identity = *identity;
  config.backend = init.backend;

  ddpx::DDPOptions ddp_options;
  ddp_options.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  ddp_options.first_bucket_cap_mb = absl::GetFlag(FLAGS_first_bucket_cap_mb);
  ddp_options.gradient_as_bucket_view = absl::GetFlag(FLAGS_gradient_as_bucket_view);
  absl::StatusOr<ddpx::trainer::TrainSummary> summary = ddpx::trainer::train(
      config, *pg, sync_factory(absl::GetFlag(FLAGS_sync), config.hook, ddp_options,
                                !config.comm_trace.empty(), fault));
  if (!summary.ok()) {
    fprintf(stderr, "train: rank %d: %s\n", (*pg)->rank(), summary.status().ToString().c_str());
    return 1;
  }
  const int rank = (*pg)->rank();
  if (rank == 0) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s\n", (long long)summary->steps,
           100 * summary->final_test_accuracy, summary->wall_seconds);
  }
  ddpx::destroy_process_group();
  // Every rank passed train()'s final barrier: the file:// store is no
  // longer needed, and removing it lets the next run use the same path (a
  // leftover file's claims would refuse its ranks; torch's FileStore also
  // removes the file after its last user).
  if (rank == 0 && init.init_method.rfind("file://", 0) == 0)
    unlink(init.init_method.substr(strlen("file://")).c_str());
  return 0;
}
