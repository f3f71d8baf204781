#include "examples/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "examples/data/sampler.h"
#include "examples/trainer/checkpoint.h"
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
absl::StatusOr<Evaluation> evaluate(TrainStep& step, ProcessGroup& pg) {
  const int64_t n = step.test_size();
  absl::StatusOr<EvalCounts> e =
      step.evaluate(n * pg.rank() / pg.size(), n * (pg.rank() + 1) / pg.size());
  if (!e.ok()) return e.status();
  Tensor sums = Tensor::from_vector<double>({e->correct, e->loss_sum});
  absl::Status s = pg.allreduce({sums})->wait();
  if (!s.ok()) return s;
  return Evaluation{sums.item(0) / n, sums.item(1) / n};
}

absl::Status barrier(ProcessGroup& pg) { return pg.barrier()->wait(); }

}  // namespace

absl::StatusOr<TrainSummary> train(const TrainConfig& c, std::shared_ptr<ProcessGroup> pg,
                                   TrainStep& step) {
  const int rank = pg->rank();
  const int world = pg->size();
  const bool lead = rank == 0;
  if (c.batch_size <= 0) return absl::InvalidArgumentError("--batch_size must be positive");
  GradientSync& sync = step.sync();

  data::DistributedSampler sampler(step.train_size(), rank, world, c.seed);
  const int64_t steps_per_epoch = (sampler.shard_size() + c.batch_size - 1) / c.batch_size;
  Progress progress;
  progress.world_size = world;
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
    absl::StatusOr<std::optional<Progress>> resumed =
        resume_from_checkpoint(ckpt, *pg, step.state(), sync);
    if (!resumed.ok()) return resumed.status();
    if (resumed->has_value()) {
      progress = **resumed;
      last_checkpoint_step = progress.global_step;
      if (lead) {
        printf("resumed from %s/%s: epoch %lld, step %lld%s\n", c.checkpoint_dir.c_str(),
               step_dir_name(progress.global_step).c_str(), (long long)progress.epoch + 1,
               (long long)progress.global_step,
               c.reset_hook_state ? " (hook state reset: --reset_hook_state)" : "");
      }
    }
  }

  MetricsWriter metrics;
  if (lead) {
    absl::Status s = metrics.open(c.metrics_out);
    if (!s.ok()) return s;
  }
  std::unique_ptr<FILE, int (*)(FILE*)> trace(nullptr, fclose);
  if (!c.comm_trace.empty()) {
    const std::string path = absl::StrFormat("%s.rank%d", c.comm_trace, rank);
    trace.reset(fopen(path.c_str(), "a"));
    if (trace == nullptr) {
      return absl::InvalidArgumentError("--comm_trace: cannot open " + path + " for appending");
    }
  }
  int64_t total_steps = c.epochs * steps_per_epoch;
  if (c.max_steps >= 0) total_steps = std::min(total_steps, c.max_steps);
  if (lead) {
    printf("training %s (%lld parameters) on %lld Fashion-MNIST images, "
           "%d ranks x batch %lld, %lld steps/epoch, backend %s, %s, %d threads/rank\n",
           step.describe().c_str(), (long long)step.num_parameters(),
           (long long)step.train_size(), world, (long long)c.batch_size,
           (long long)steps_per_epoch, c.backend.c_str(), sync.describe().c_str(), c.threads);
    fflush(stdout);
  }

  const Clock::time_point run_start = Clock::now();
  auto wall = [&] { return progress.wall_seconds + seconds_since(run_start); };
  // Collective; at most one checkpoint per step (an epoch's end and
  // --checkpoint_every or --max_steps can fall on the same step).
  auto checkpoint = [&]() -> absl::Status {
    if (c.checkpoint_dir.empty() || progress.global_step == last_checkpoint_step)
      return absl::OkStatus();
    Progress p = progress;
    p.wall_seconds = wall();
    absl::Status s = save_checkpoint(ckpt, *pg, p, step.state(), sync);
    if (s.ok()) last_checkpoint_step = progress.global_step;
    return s;
  };

  LiveLine live;
  StepLog step_log(metrics, live, c.log_every);
  TrainSummary summary;
  bool stopped = false;
  Evaluation eval;
  auto reached_max_steps = [&] {
    return c.max_steps >= 0 && progress.global_step >= c.max_steps;
  };
  bool evaluated = false;
  while (progress.epoch < c.epochs && !reached_max_steps()) {
    const std::vector<int64_t> order = sampler.indices(progress.epoch);
    const Clock::time_point epoch_start = Clock::now();
    step_log.restart_window();
    for (; progress.step_in_epoch < steps_per_epoch; ++progress.step_in_epoch) {
      if (reached_max_steps()) {
        stopped = true;
        break;
      }
      const Clock::time_point step_start = Clock::now();
      const int64_t first = progress.step_in_epoch * c.batch_size;
      const int64_t batch = std::min<int64_t>(c.batch_size, sampler.shard_size() - first);
      const float lr = learning_rate_at(c.lr_schedule, c.lr, progress.global_step, total_steps);
      absl::StatusOr<double> loss_or = step.step(order.data() + first, batch, lr);
      if (!loss_or.ok()) return loss_or.status();
      const double loss = *loss_or;
      ++progress.global_step;
      if (!std::isfinite(loss)) {
        return absl::InternalError(absl::StrFormat(
            "rank %d: loss is %f at step %lld (diverged; lower --lr?)", rank, loss,
            (long long)progress.global_step));
      }

      const double step_time = seconds_since(step_start);
      const SyncStats st = sync.last_stats();
      progress.epoch_loss_sum += loss;
      ++progress.epoch_loss_count;
      if (trace != nullptr) {
        auto json = [](const std::vector<CommSpan>& spans) {
          std::string out;
          for (const CommSpan& span : spans) {
            absl::StrAppendFormat(&out, "%s[%d,%d,%d]", out.empty() ? "" : ",", span.bucket,
                                  span.enter_ns, span.done_ns);
          }
          return out;
        };
        fprintf(trace.get(), "{\"step\":%lld,\"rank\":%d,\"spans\":[%s],\"collectives\":[%s]}\n",
                (long long)progress.global_step, rank, json(st.comm_spans).c_str(),
                json(st.collective_spans).c_str());
      }
      if (lead) {
        step_log.write({progress.epoch, c.epochs, progress.step_in_epoch, steps_per_epoch,
                        progress.global_step, world, batch, c.batch_size, loss, step_time,
                        st.comm_wait_seconds, st.bytes_communicated, st.gradient_bytes,
                        st.compression_ratio, static_cast<double>(lr), wall()});
      }
      if (c.eval_every > 0 && progress.global_step % c.eval_every == 0) {
        absl::StatusOr<Evaluation> e = evaluate(step, *pg);
        if (!e.ok()) return e.status();
        if (lead) {
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
          progress.step_in_epoch + 1 < steps_per_epoch) {
        progress.step_in_epoch += 1;  // the step just taken is part of the checkpoint
        absl::Status s = checkpoint();
        progress.step_in_epoch -= 1;
        if (!s.ok()) return s;
      }
    }
    absl::StatusOr<Evaluation> e = evaluate(step, *pg);
    if (!e.ok()) return e.status();
    eval = *e;
    evaluated = true;
    if (lead) {
      live.finish();
      const double epoch_time = seconds_since(epoch_start);
      // Over the whole epoch, the steps before a resume included.
      const double train_loss =
          progress.epoch_loss_count ? progress.epoch_loss_sum / progress.epoch_loss_count : 0.0;
      metrics.write(report_epoch({progress.epoch, progress.global_step, stopped, train_loss,
                                  eval.loss, eval.accuracy, epoch_time, wall()})
                        .add("hook", c.hook)
                        .add("backend", c.backend)
                        .add("model", c.model)
                        .add("world_size", static_cast<int64_t>(world)));
    }
    if (stopped) break;  // checkpointed below, mid-epoch
    ++progress.epoch;
    progress.step_in_epoch = 0;
    progress.epoch_loss_sum = 0;
    progress.epoch_loss_count = 0;
    absl::Status s = checkpoint();
    if (!s.ok()) return s;
  }
  if (stopped) {
    absl::Status s = checkpoint();
    if (!s.ok()) return s;
  }
  if (!evaluated) {  // resumed a finished run, or --max_steps already reached
    absl::StatusOr<Evaluation> e = evaluate(step, *pg);
    if (!e.ok()) return e.status();
    eval = *e;
    if (lead) printf("test accuracy %.2f%% (nothing left to train)\n", 100 * eval.accuracy);
  }
  // Leave together: a rank that exits while a peer still reads its last
  // collective can reset the connection under it.
  if (absl::Status s = barrier(*pg); !s.ok()) return s;
  summary.steps = progress.global_step;
  summary.final_test_accuracy = eval.accuracy;
  summary.final_test_loss = eval.loss;
  summary.wall_seconds = wall();
  return summary;
}

}  // namespace ddpx::trainer
