#include "examples/trainer/elastic_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "elastic/epoch_plan.h"
#include "elastic/state_transfer.h"
#include "examples/trainer/metrics.h"

namespace ddpx::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The wall clock in ms, comparable across the processes of a job (rank 0
// changes with the membership, and so does whose clock wall_s counts from).
int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Where the run is; the same on every member after every committed step.
struct Position {
  int64_t epoch = 0;
  int64_t consumed = 0;  // samples of the epoch's permutation trained on
  int64_t global_step = 0;
  int64_t step_in_epoch = 0;
  double epoch_loss_sum = 0;
  int64_t epoch_loss_count = 0;
};

constexpr char kStateMagic[8] = {'D', 'D', 'P', 'X', 'E', 'L', 'S', 'T'};

// Position, model and optimizer, as rank 0 sends them to newcomers.
absl::StatusOr<std::string> save_state(const Position& p, TrainState& state) {
  std::ostringstream out;
  out.write(kStateMagic, sizeof(kStateMagic));
  out.write(reinterpret_cast<const char*>(&p), sizeof(p));
  if (absl::Status s = state.save_model(out); !s.ok()) return s;
  if (absl::Status s = state.save_optimizer(out); !s.ok()) return s;
  return out.str();
}

absl::Status load_state(const std::string& blob, Position* p, TrainState& state) {
  std::istringstream in(blob);
  char magic[sizeof(kStateMagic)] = {};
  in.read(magic, sizeof(magic));
  if (!in || memcmp(magic, kStateMagic, sizeof(magic)) != 0) {
    return absl::DataLossError("elastic state transfer: the received state does not start "
                               "with DDPXELST");
  }
  in.read(reinterpret_cast<char*>(p), sizeof(*p));
  if (!in) return absl::DataLossError("elastic state transfer: the position is cut short");
  if (absl::Status s = state.load_model(in); !s.ok()) return s;
  if (absl::Status s = state.load_optimizer(in); !s.ok()) return s;
  if (in.peek() != EOF) {
    return absl::DataLossError("elastic state transfer: bytes left after the optimizer state");
  }
  return absl::OkStatus();
}

std::string ids(const std::vector<int64_t>& v) { return absl::StrJoin(v, ","); }

// "store failed" errors come from the store (elastic_group.cc): no
// generation can form without it.
bool store_gone(const absl::Status& s) {
  return absl::StrContains(s.message(), "the job's store failed");
}

}  // namespace

absl::StatusOr<TrainSummary> train_elastic(const TrainConfig& c, elastic::ElasticGroup& group,
                                           TrainStep& step) {
  if (c.batch_size <= 0) return absl::InvalidArgumentError("--batch_size must be positive");
  if (!c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--elastic does not take --checkpoint_dir: the state lives in the ranks' memory and "
        "newcomers get it from a live rank (docs/elastic.md)");
  }
  const int64_t n = step.train_size();
  Position pos;
  MetricsWriter metrics;
  bool metrics_open = false;
  LiveLine live;
  const Clock::time_point run_start = Clock::now();
  auto wall = [&] { return seconds_since(run_start); };
  auto lead = [&] { return group.rank() == 0; };
  auto open_metrics = [&]() -> absl::Status {
    if (metrics_open || !lead()) return absl::OkStatus();
    metrics_open = true;
    return metrics.open(c.metrics_out);
  };

  // A generation's start: DDP over its group, then the state to newcomers.
  auto start_generation = [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<GradientSync>> old = step.reset_sync(group.pg());
    if (!old.ok()) return old.status();
    group.retire(std::shared_ptr<GradientSync>(*std::move(old)));
    if (!group.has_newcomers()) return absl::OkStatus();
    std::string blob;
    if (lead()) {
      absl::StatusOr<std::string> saved = save_state(pos, step.state());
      if (!saved.ok()) return saved.status();
      blob = *std::move(saved);
    }
    if (absl::Status s = elastic::broadcast_state(*group.pg(), 0, &blob); !s.ok()) return s;
    if (!lead()) return load_state(blob, &pos, step.state());
    return absl::OkStatus();
  };

  // After a failed step (or an admission): the next generation, rebuilt
  // until one starts. `lost` steps were discarded by the failure.
  auto recover = [&](absl::Status why, int64_t lost) -> absl::Status {
    const Clock::time_point t0 = Clock::now();
    // Each generation that could not start (a member died meanwhile), and why.
    std::string failed_starts;
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<elastic::MembershipChange> change = group.reform(why);
      if (!change.ok()) return change.status();
      absl::Status s = start_generation();
      if (!s.ok()) {
        if (store_gone(s) || attempt >= 8) return s;
        absl::StrAppendFormat(&failed_starts, "%sgeneration %lld did not start after %.3f s: %s",
                              failed_starts.empty() ? "" : "; ",
                              (long long)change->generation, seconds_since(t0),
                              std::string(s.message()));
        why = s;
        continue;
      }
      if (absl::Status m = open_metrics(); !m.ok()) return m;
      if (lead()) {
        live.finish();
        const double took = seconds_since(t0);
        printf("membership: generation %lld, %d ranks (members %s)%s%s, at step %lld, "
               "recovered in %.3f s, %lld step%s lost%s%s\n",
               (long long)change->generation, change->size, ids(change->members).c_str(),
               change->left.empty() ? "" : absl::StrCat("; left: ", ids(change->left)).c_str(),
               change->joined.empty() ? ""
                                      : absl::StrCat("; joined: ", ids(change->joined)).c_str(),
               (long long)pos.global_step, took, (long long)lost, lost == 1 ? "" : "s",
               why.ok() ? "" : "; cause: ", why.ok() ? "" : std::string(why.message()).c_str());
        fflush(stdout);
        metrics.write(JsonLine()
                          .add("type", std::string("membership"))
                          .add("generation", change->generation)
                          .add("world_size", static_cast<int64_t>(change->size))
                          .add("members", ids(change->members))
                          .add("left", ids(change->left))
                          .add("joined", ids(change->joined))
                          .add("step", pos.global_step)
                          .add("recovery_s", took)
                          .add("steps_lost", lost)
                          .add("cause", why.ok() ? std::string("admission")
                                                 : std::string(why.message()))
                          .add("failed_starts", failed_starts)
                          .add("wall_s", wall())
                          .add("unix_ms", unix_ms()));
      }
      return absl::OkStatus();
    }
  };

  if (absl::Status s = start_generation(); !s.ok()) {
    if (store_gone(s)) return s;
    if (absl::Status r = recover(s, 0); !r.ok()) return r;
  }
  if (absl::Status m = open_metrics(); !m.ok()) return m;
  if (lead()) {
    printf("training %s (%lld parameters) on %lld Fashion-MNIST images, elastic: %d ranks "
           "(generation %lld) x batch %lld, backend %s, %s\n",
           step.describe().c_str(), (long long)step.num_parameters(), (long long)n, group.size(),
           (long long)group.generation(), (long long)c.batch_size, c.backend.c_str(),
           step.sync().describe().c_str());
    fflush(stdout);
  }

  // The vote's outcome for the step under way (set by the gate).
  elastic::CommitDecision decision;
  bool voted = false;
  absl::Status vote_error;
  step.set_commit_gate([&](const absl::Status& synced) -> absl::StatusOr<bool> {
    voted = true;
    absl::StatusOr<elastic::CommitDecision> d = group.should_commit(pos.global_step, synced);
    if (!d.ok()) {
      vote_error = d.status();
      return d.status();
    }
    decision = *d;
    return d->commit;
  });

  const int64_t steps_per_epoch_hint = std::max<int64_t>(1, n / (c.batch_size * group.size()));
  int64_t total_steps = c.epochs * steps_per_epoch_hint;
  if (c.max_steps >= 0) total_steps = std::min(total_steps, c.max_steps);
  auto reached_max_steps = [&] { return c.max_steps >= 0 && pos.global_step >= c.max_steps; };
  double accuracy = 0, test_loss = 0;
  bool stopped = false;
  while (pos.epoch < c.epochs && !stopped) {
    const std::vector<int64_t> order = elastic::epoch_permutation(n, c.seed, pos.epoch);
    const Clock::time_point epoch_start = Clock::now();
    for (;;) {
      if (reached_max_steps()) {
        stopped = true;
        break;
      }
      const elastic::StepSlice slice =
          elastic::step_slice(n, pos.consumed, group.size(), group.rank(), c.batch_size);
      if (slice.epoch_done) break;
      const Clock::time_point step_start = Clock::now();
      const float lr = learning_rate_at(c.lr_schedule, c.lr, pos.global_step, total_steps);
      voted = false;
      vote_error = absl::OkStatus();
      decision = {};
      absl::StatusOr<double> loss = step.step(order.data() + slice.begin,
                                              slice.end - slice.begin, lr);
      if (!vote_error.ok()) return vote_error;  // the store is gone
      if (!loss.ok()) {
        // Discarded everywhere: say so if this rank has not voted yet, so
        // the others need not wait for it.
        if (!voted) {
          absl::StatusOr<elastic::CommitDecision> d =
              group.should_commit(pos.global_step, loss.status());
          if (!d.ok()) return d.status();
        }
        if (absl::Status s = recover(loss.status(), 1); !s.ok()) return s;
        continue;
      }
      pos.consumed = slice.consumed_after;
      ++pos.global_step;
      ++pos.step_in_epoch;
      if (!std::isfinite(*loss)) {
        return absl::InternalError(absl::StrFormat("loss is %f at step %lld (diverged; lower --lr?)",
                                                   *loss, (long long)pos.global_step));
      }
      pos.epoch_loss_sum += *loss;
      ++pos.epoch_loss_count;
      if (lead()) {
        const SyncStats st = step.sync().last_stats();
        StepReport r{pos.epoch, c.epochs, pos.step_in_epoch - 1, steps_per_epoch_hint,
                     pos.global_step, group.size(), slice.end - slice.begin, c.batch_size,
                     *loss, seconds_since(step_start), st.comm_wait_seconds,
                     st.bytes_communicated, st.gradient_bytes, st.compression_ratio,
                     static_cast<double>(lr), wall()};
        metrics.write(step_json(r)
                          .add("generation", group.generation())
                          .add("unix_ms", unix_ms()));
        if (c.log_every > 0 && pos.global_step % c.log_every == 0) {
          live.update(absl::StrFormat(
              "epoch %lld step %lld | loss %.4f | %d ranks, generation %lld | %.1f ms/step",
              (long long)pos.epoch + 1, (long long)pos.global_step, *loss, group.size(),
              (long long)group.generation(), 1000 * seconds_since(step_start)));
        }
      }
      if (decision.admit) {
        if (absl::Status s = recover(absl::OkStatus(), 0); !s.ok()) return s;
      }
    }
    // The epoch's evaluation, taken again after a change of membership.
    for (;;) {
      const int64_t t = step.test_size();
      const int r = group.rank(), w = group.size();
      absl::StatusOr<EvalCounts> e = step.evaluate(t * r / w, t * (r + 1) / w);
      if (!e.ok()) return e.status();
      Tensor sums = Tensor::from_vector<double>({e->correct, e->loss_sum});
      absl::Status s = group.pg()->allreduce({sums})->wait();
      if (s.ok()) {
        accuracy = sums.item(0) / t;
        test_loss = sums.item(1) / t;
        break;
      }
      if (absl::Status rs = recover(s, 0); !rs.ok()) return rs;
    }
    if (lead()) {
      live.finish();
      const double train_loss = pos.epoch_loss_count ? pos.epoch_loss_sum / pos.epoch_loss_count : 0;
      metrics.write(report_epoch({pos.epoch, pos.global_step, stopped, train_loss, test_loss,
                                  accuracy, seconds_since(epoch_start), wall()})
                        .add("hook", c.hook)
                        .add("backend", c.backend)
                        .add("model", c.model)
                        .add("world_size", static_cast<int64_t>(group.size()))
                        .add("generation", group.generation()));
    }
    if (stopped) break;
    ++pos.epoch;
    pos.consumed = 0;
    pos.step_in_epoch = 0;
    pos.epoch_loss_sum = 0;
    pos.epoch_loss_count = 0;
  }
  step.set_commit_gate(nullptr);
  TrainSummary summary;
  summary.steps = pos.global_step;
  summary.final_test_accuracy = accuracy;
  summary.final_test_loss = test_loss;
  summary.wall_seconds = wall();
  return summary;
}

}  // namespace ddpx::trainer
