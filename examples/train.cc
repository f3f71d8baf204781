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
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "examples/trainer/cli.h"
#include "examples/trainer/crc32c.h"
#include "examples/trainer/ddp_sync.h"
#include "examples/trainer/elastic_join.h"
#include "examples/trainer/elastic_membership.h"
#include "examples/trainer/fault_injection.h"
#include "examples/trainer/flags.h"
#include "examples/trainer/mlp_step.h"
#include "examples/trainer/pg_allreduce_sync.h"
#include "examples/trainer/trainer.h"
#include "hooks/registry.h"
#include "process_group/rendezvous/init.h"

// The flags of this model and this trainer's DDP; the rest are
// examples/trainer/flags.h's.
ABSL_FLAG(std::string, sync, "ddp",
          "ddp: DistributedDataParallel with --hook; per_param: one allreduce per "
          "parameter on the process group (baseline without buckets or hooks).");
ABSL_FLAG(std::string, hidden, "2048,2048", "Hidden layer widths, comma separated.");
ABSL_FLAG(std::string, comm_trace, "",
          "Every rank appends per-step communication spans (hook entered/completed, "
          "CLOCK_MONOTONIC) to <path>.rank<R>; examples/benchmarks/comm_time.py reads them.");
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

// --elastic: the data first (a newcomer is then ready when admitted), then
// the job; DDP is built per generation (examples/trainer/elastic_membership.h).
int run_elastic(const ddpx::InitOptions& init, const ddpx::trainer::TrainerFlags& flags,
                const ddpx::trainer::MlpOptions& model,
                const ddpx::trainer::SyncFactory& make_sync) {
  absl::StatusOr<std::unique_ptr<ddpx::trainer::MlpStep>> step =
      ddpx::trainer::MlpStep::create(model, nullptr, make_sync);
  if (!step.ok()) {
    fprintf(stderr, "train: %s\n", step.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<ddpx::elastic::ElasticGroup>> group =
      ddpx::trainer::join_elastic_job(init);
  if (!group.ok()) {
    fprintf(stderr, "train: %s\n", std::string(group.status().message()).c_str());
    return group.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1;
  }
  ddpx::trainer::ElasticMembership world(**group);
  absl::StatusOr<ddpx::trainer::TrainSummary> summary =
      ddpx::trainer::train(flags.loop, world, **step);
  const int rank = (*group)->rank();
  const int64_t member = (*group)->member_id();
  // Every rank's parameters, bit for bit: equal on all ranks after any
  // membership change (tests/elastic compares them), and those of the last
  // checkpoint of a job that fell below --min_nproc.
  auto print_parameters = [&] {
    std::ostringstream params;
    if (absl::Status s = (*step)->state().save_model(params); s.ok()) {
      printf("member %lld rank %d: parameters crc32c 0x%08x\n", (long long)member, rank,
             ddpx::trainer::crc32c(params.str()));
    }
    // And the hook state every rank holds alike (PowerSGD's iteration,
    // warm-start P/Q, generator), without the rank's own residual (its
    // error feedback, which differs by rank). Printed last: it drops it.
    ddpx::trainer::GradientSync& sync = (*step)->sync();
    if (sync.hook_iteration() >= 0) {
      std::ostringstream hook;
      sync.drop_local_hook_state();
      if (sync.save_state(hook).ok()) {
        printf("member %lld rank %d: hook iteration %lld, shared state crc32c 0x%08x\n",
               (long long)member, rank, (long long)sync.hook_iteration(),
               ddpx::trainer::crc32c(hook.str()));
      }
    }
    fflush(stdout);
  };
  if (!summary.ok()) {
    if (world.ends_with_committed_state(summary.status())) print_parameters();
    fprintf(stderr, "train: member %lld: %s\n", (long long)member,
            std::string(summary.status().message()).c_str());
    return summary.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1;
  }
  print_parameters();
  if (rank == 0) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s, %d ranks at the end (generation "
           "%lld)\n",
           (long long)summary->steps, 100 * summary->final_test_accuracy, summary->wall_seconds,
           (*group)->size(), (long long)(*group)->generation());
    fflush(stdout);
  }
  (*group)->finish();
  (*step).reset();  // DDP before its process group
  group->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Data-parallel MLP training on Fashion-MNIST.\n"
      "  train --nproc=4 --backend=gloo --hook=powersgd\n"
      "  srun -n 4 train --init=env://");
  // An epoch of the MLP takes seconds (the README's two reach ~85%);
  // docs/powersgd.md's and BENCHMARKS.md's figures were measured with this
  // constant lr of 0.05. nn::Mlp's gradients are bucket views from the
  // first step, which saves a copy in and out of the buckets per step.
  ddpx::trainer::set_model_defaults({/*epochs=*/1, /*lr=*/0.05, /*lr_schedule=*/"constant",
                                     /*gradient_as_bucket_view=*/true});
  absl::ParseCommandLine(argc, argv);
  if (std::optional<int> launched = ddpx::trainer::launch_elastic_unless_rank(argc, argv)) {
    return *launched;
  }
  if (std::optional<int> launched = ddpx::trainer::launch_unless_rank(argc, argv)) {
    return *launched;
  }
  auto fail = [](const absl::Status& s, int code) {
    fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
    return code;
  };
  absl::StatusOr<ddpx::InitOptions> init_or = ddpx::trainer::init_options_from_flags();
  if (!init_or.ok()) return fail(init_or.status(), 2);
  ddpx::InitOptions init = *std::move(init_or);
  // What every rank must agree on, refused at rendezvous naming the flag.
  init.job_settings =
      ddpx::trainer::job_settings_from_flags("examples/train", {"hidden", "sync"});
  const std::string sync = absl::GetFlag(FLAGS_sync);
  absl::StatusOr<ddpx::trainer::TrainerFlags> flags =
      ddpx::trainer::trainer_flags(init, sync, "mlp");
  if (!flags.ok()) return fail(flags.status(), 2);
  flags->loop.comm_trace = absl::GetFlag(FLAGS_comm_trace);
  openblas_set_num_threads(flags->threads);
  absl::StatusOr<std::vector<int64_t>> hidden =
      ddpx::trainer::parse_hidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return fail(hidden.status(), 2);
  ddpx::trainer::InjectedFault fault{absl::GetFlag(FLAGS_inject_fault),
                                     absl::GetFlag(FLAGS_inject_fault_rank),
                                     absl::GetFlag(FLAGS_inject_fault_at)};
  if (absl::Status s = ddpx::trainer::check_fault_kind(fault.kind); !s.ok()) return fail(s, 2);

  ddpx::trainer::MlpOptions model;
  model.data_dir = flags->data_dir;
  model.train_limit = flags->train_limit;
  model.hidden = *hidden;
  model.seed = flags->seed;
  model.lr = flags->loop.lr;
  model.momentum = flags->momentum;
  model.weight_decay = flags->weight_decay;
  ddpx::DDPOptions ddp_options;
  ddp_options.bucket_cap_mb = flags->bucket_cap_mb;
  ddp_options.first_bucket_cap_mb = flags->first_bucket_cap_mb;
  ddp_options.gradient_as_bucket_view = flags->gradient_as_bucket_view;
  const ddpx::trainer::SyncFactory make_sync =
      sync_factory(sync, flags->loop.hook, ddp_options, !flags->loop.comm_trace.empty(), fault);
  if (ddpx::trainer::elastic_mode()) return run_elastic(init, *flags, model, make_sync);

  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> pg = ddpx::init_process_group(init);
  if (!pg.ok()) {
    fprintf(stderr, "train: init_process_group(%s, %s) failed: %s\n", init.backend.c_str(),
            init.init_method.c_str(), pg.status().ToString().c_str());
    return 1;
  }
  const int rank = (*pg)->rank();
  absl::StatusOr<std::unique_ptr<ddpx::trainer::MlpStep>> step =
      ddpx::trainer::MlpStep::create(model, *pg, make_sync);
  absl::StatusOr<ddpx::trainer::TrainSummary> summary =
      step.ok() ? ddpx::trainer::train(flags->loop, *pg, **step)
                : absl::StatusOr<ddpx::trainer::TrainSummary>(step.status());
  if (!summary.ok()) {
    fprintf(stderr, "train: rank %d: %s\n", rank, summary.status().ToString().c_str());
    return 1;
  }
  if (rank == 0) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s\n", (long long)summary->steps,
           100 * summary->final_test_accuracy, summary->wall_seconds);
  }
  step->reset();  // DDP before its process group
  ddpx::destroy_process_group();
  // Every rank passed train()'s final barrier: the file:// store is no
  // longer needed, and removing it lets the next run use the same path (a
  // leftover file's claims would refuse its ranks; torch's FileStore also
  // removes the file after its last user).
  if (rank == 0 && init.init_method.rfind("file://", 0) == 0)
    unlink(init.init_method.substr(strlen("file://")).c_str());
  return 0;
}
