#include "examples/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/fixed_world.h"
#include "examples/trainer/metrics.h"

namespace ddpx::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

// Every rank evaluates a contiguous slice of the test set; the counts are
// summed with one allreduce, so the evaluation costs 1/world of the time.
// Taken again when the world was rebuilt after the allreduce failed.
absl::StatusOr<Evaluation> evaluate(TrainStep& step, Membership& world) {
  const int64_t n = step.test_size();
  for (;;) {
    ProcessGroup& pg = world.pg();
    absl::StatusOr<EvalCounts> e =
        step.evaluate(n * pg.rank() / pg.size(), n * (pg.rank() + 1) / pg.size());
    if (!e.ok()) return e.status();
    Tensor sums = Tensor::from_vector<double>({e->correct, e->loss_sum});
    absl::Status s = pg.allreduce({sums})->wait();
    if (s.ok()) return Evaluation{sums.item(0) / n, sums.item(1) / n};
    if (absl::Status r = world.recover(s); !r.ok()) return r;
  }
}

// --comm_trace's line of one step (timed_hook.h, timed_backend.h).
void write_trace(FILE* trace, int64_t global_step, int rank, const SyncStats& st) {
  auto json = [](const std::vector<CommSpan>& spans) {
    std::string out;
    for (const CommSpan& span : spans) {
      absl::StrAppendFormat(&out, "%s[%d,%d,%d]", out.empty() ? "" : ",", span.bucket,
                            span.enter_ns, span.done_ns);
    }
    return out;
  };
  fprintf(trace, "{\"step\":%lld,\"rank\":%d,\"spans\":[%s],\"collectives\":[%s]}\n",
          (long long)global_step, rank, json(st.comm_spans).c_str(),
          json(st.collective_spans).c_str());
}

}  // namespace

absl::StatusOr<TrainSummary> train(const TrainConfig& c, std::shared_ptr<ProcessGroup> pg,
                                   TrainStep& step) {
  FixedWorld world(std::move(pg));
  return train(c, world, step);
}

absl::StatusOr<TrainSummary> train(const TrainConfig& c, Membership& world, TrainStep& step) {
  if (c.batch_size <= 0) return absl::InvalidArgumentError("--batch_size must be positive");
  Progress progress;
  const Clock::time_point run_start = Clock::now();
  auto wall = [&] { return progress.wall_seconds + seconds_since(run_start); };
  auto lead = [&] { return world.pg().rank() == 0; };
  MetricsWriter metrics;
  bool metrics_open = false;
  // Opened by whichever process is rank 0 when it first reports.
  auto open_metrics = [&]() -> absl::Status {
    if (metrics_open || !lead()) return absl::OkStatus();
    metrics_open = true;
    return metrics.open(c.metrics_out);
  };
  LiveLine live;
  auto on_change = [&](const MembershipReport& change) -> absl::Status {
    if (absl::Status s = open_metrics(); !s.ok() || !lead()) return s;
    live.finish();
    MembershipReport r = change;
    r.wall_s = wall();
    metrics.write(report_membership(r));
    return absl::OkStatus();
  };
  if (absl::Status s = world.start(c, progress, step, on_change); !s.ok()) return s;
  const int64_t steps_per_epoch = world.steps_per_epoch();
  progress.world_size = world.pg().size();
  progress.steps_per_epoch = steps_per_epoch;
  CheckpointOptions ckpt;
  ckpt.dir = c.checkpoint_dir;
  ckpt.keep = c.keep_checkpoints;
  ckpt.resume = c.resume;
  ckpt.reset_hook_state = c.reset_hook_state;
  ckpt.hook = c.hook_identity;
  ckpt.job_id = c.job_id;
  ckpt.epochs = c.epochs;
  ckpt.steps_per_epoch = steps_per_epoch;
  int64_t last_checkpoint_step = -1;
  if (!c.checkpoint_dir.empty()) {
    absl::StatusOr<std::optional<Progress>> resumed = world.resume(ckpt);
    if (!resumed.ok()) return resumed.status();
    if (resumed->has_value()) {
      progress = **resumed;
      last_checkpoint_step = progress.global_step;
      if (lead()) {
        printf("resumed from %s/%s: epoch %lld, step %lld%s\n", c.checkpoint_dir.c_str(),
               step_dir_name(progress.global_step).c_str(), (long long)progress.epoch + 1,
               (long long)progress.global_step,
               c.reset_hook_state ? " (hook state reset: --reset_hook_state)" : "");
      }
    }
  }

  if (absl::Status s = open_metrics(); !s.ok()) return s;
  std::unique_ptr<FILE, int (*)(FILE*)> trace(nullptr, fclose);
  if (!c.comm_trace.empty()) {
    const std::string path = absl::StrFormat("%s.rank%d", c.comm_trace, world.pg().rank());
    trace.reset(fopen(path.c_str(), "a"));
    if (trace == nullptr) {
      return absl::InvalidArgumentError("--comm_trace: cannot open " + path + " for appending");
    }
  }
  int64_t total_steps = c.epochs * steps_per_epoch;
  if (c.max_steps >= 0) total_steps = std::min(total_steps, c.max_steps);
  if (lead()) {
    printf("training %s (%lld parameters) on %lld Fashion-MNIST images, "
           "%s x batch %lld, %lld steps/epoch, backend %s, %s, %d threads/rank\n",
           step.describe().c_str(), (long long)step.num_parameters(),
           (long long)step.train_size(), world.describe().c_str(), (long long)c.batch_size,
           (long long)steps_per_epoch, c.backend.c_str(), step.sync().describe().c_str(),
           c.threads);
    fflush(stdout);
  }

  // Collective; at most one checkpoint per step (an epoch's end and
  // --checkpoint_every or --max_steps can fall on the same step).
  auto checkpoint = [&]() -> absl::Status {
    if (c.checkpoint_dir.empty() || progress.global_step == last_checkpoint_step)
      return absl::OkStatus();
    Progress p = progress;
    p.wall_seconds = wall();
    absl::Status s = world.save_checkpoint(ckpt, p);
    if (s.ok()) last_checkpoint_step = progress.global_step;
    return s;
  };
  // The run ends with `why`; an elastic job below its minimum writes its
  // last checkpoint first (the state of the last committed step). Even of
  // the step last checkpointed: rank 0 may have died while writing it (a
  // complete one is not written again).
  auto end_with = [&](const absl::Status& why) -> absl::Status {
    if (c.checkpoint_dir.empty() || !world.ends_with_committed_state(why)) return why;
    Progress p = progress;
    p.wall_seconds = wall();
    if (absl::Status s = world.save_checkpoint(ckpt, p); !s.ok()) {
      fprintf(stderr, "error: the last checkpoint was not written: %s\n",
              std::string(s.message()).c_str());
    }
    return why;
  };

  StepLog step_log(metrics, live, c.log_every);
  bool stopped = false;
  Evaluation eval;
  auto reached_max_steps = [&] {
    return c.max_steps >= 0 && progress.global_step >= c.max_steps;
  };
  bool evaluated = false;
  while (progress.epoch < c.epochs && !reached_max_steps()) {
    world.begin_epoch(progress.epoch);
    const Clock::time_point epoch_start = Clock::now();
    step_log.restart_window();
    for (;;) {
      const Batch batch = world.next_batch();
      if (batch.epoch_done) break;
      if (reached_max_steps()) {
        stopped = true;
        break;
      }
      const Clock::time_point step_start = Clock::now();
      const float lr = learning_rate_at(c.lr_schedule, c.lr, progress.global_step, total_steps);
      absl::StatusOr<std::optional<double>> taken = world.take_step(batch, lr);
      if (!taken.ok()) return end_with(taken.status());
      if (!taken->has_value()) continue;  // discarded on every rank; the world was rebuilt
      const double loss = **taken;
      ++progress.global_step;
      ++progress.step_in_epoch;
      if (!std::isfinite(loss)) {
        return absl::InternalError(absl::StrFormat(
            "rank %d: loss is %f at step %lld (diverged; lower --lr?)", world.pg().rank(), loss,
            (long long)progress.global_step));
      }

      const double step_time = seconds_since(step_start);
      const SyncStats st = step.sync().last_stats();
      progress.epoch_loss_sum += loss;
      ++progress.epoch_loss_count;
      if (trace != nullptr) write_trace(trace.get(), progress.global_step, world.pg().rank(), st);
      if (lead()) {
        const StepReport report{progress.epoch, c.epochs, progress.step_in_epoch - 1,
                                steps_per_epoch, progress.global_step, world.pg().size(),
                                batch.size, c.batch_size, loss, step_time,
                                st.comm_wait_seconds, st.bytes_communicated, st.gradient_bytes,
                                st.compression_ratio, static_cast<double>(lr), wall()};
        JsonLine line = step_json(report);
        world.annotate(line);
        step_log.write(report, line);
      }
      if (c.eval_every > 0 && progress.global_step % c.eval_every == 0) {
        absl::StatusOr<Evaluation> e = evaluate(step, world);
        if (!e.ok()) return end_with(e.status());
        if (lead()) {
          live.finish();
          printf("step %lld: test loss %.4f | test accuracy %.2f%% | wall %.1f s\n",
                 (long long)progress.global_step, e->loss, 100 * e->accuracy, wall());
          metrics.write(JsonLine()
                            .add("type", std::string("eval"))
                            .add("epoch", progress.epoch + 1)
                            .add("step", progress.global_step)
                            .add("test_loss", e->loss)
                            .add("test_acc", e->accuracy)
                            .add("wall_s", wall()));
        }
      }
      // On an epoch's last step the end-of-epoch checkpoint below stands for
      // this one (same step, with the epoch's evaluation already done).
      if (c.checkpoint_every > 0 && progress.global_step % c.checkpoint_every == 0 &&
          progress.step_in_epoch < steps_per_epoch) {
        if (absl::Status s = checkpoint(); !s.ok()) return s;
      }
      if (absl::Status s = world.after_step(); !s.ok()) return end_with(s);
    }
    absl::StatusOr<Evaluation> e = evaluate(step, world);
    if (!e.ok()) return end_with(e.status());
    eval = *e;
    evaluated = true;
    if (lead()) {
      live.finish();
      const double epoch_time = seconds_since(epoch_start);
      // Over the whole epoch, the steps before a resume included.
      const double train_loss =
          progress.epoch_loss_count ? progress.epoch_loss_sum / progress.epoch_loss_count : 0.0;
      JsonLine line = report_epoch({progress.epoch, progress.global_step, stopped, train_loss,
                                    eval.loss, eval.accuracy, epoch_time, wall()})
                          .add("hook", c.hook)
                          .add("backend", c.backend)
                          .add("model", c.model)
                          .add("world_size", static_cast<int64_t>(world.pg().size()));
      world.annotate(line);
      metrics.write(line);
    }
    if (stopped) break;  // checkpointed below, mid-epoch
    ++progress.epoch;
    progress.step_in_epoch = 0;
    progress.epoch_loss_sum = 0;
    progress.epoch_loss_count = 0;
    world.end_epoch();
    if (absl::Status s = checkpoint(); !s.ok()) return s;
  }
  if (stopped) {
    if (absl::Status s = checkpoint(); !s.ok()) return s;
  }
  if (!evaluated) {  // resumed a finished run, or --max_steps already reached
    absl::StatusOr<Evaluation> e = evaluate(step, world);
    if (!e.ok()) return e.status();
    eval = *e;
    if (lead()) printf("test accuracy %.2f%% (nothing left to train)\n", 100 * eval.accuracy);
  }
  if (absl::Status s = world.finish(); !s.ok()) return s;
  TrainSummary summary;
  summary.steps = progress.global_step;
  summary.final_test_accuracy = eval.accuracy;
  summary.final_test_loss = eval.loss;
  summary.wall_seconds = wall();
  return summary;
}

}  // namespace ddpx::trainer
