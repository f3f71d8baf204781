#include "examples/trainer/elastic_membership.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "elastic/state_transfer.h"
#include "examples/trainer/elastic_state.h"
#include "examples/trainer/trainer.h"

namespace ddpx::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "store failed" errors come from the store (elastic_group.cc): no
// generation can form without it.
bool store_gone(const absl::Status& s) {
  return absl::StrContains(s.message(), "the job's store failed");
}

// reform()'s end of the job (elastic_group.cc's END record).
bool below_minimum(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "below the minimum");
}

// What rank 0 sends when the first generation resumes: 'N' (no
// checkpoint), 'S' and the state, or 'E', the error's code and message.
constexpr char kNoCheckpoint = 'N';
constexpr char kCheckpointState = 'S';
constexpr char kCheckpointError = 'E';

}  // namespace

std::string ElasticMembership::describe() const {
  return absl::StrFormat("elastic: %d ranks (generation %lld)", group_.size(),
                         (long long)group_.generation());
}

absl::Status ElasticMembership::start(const TrainConfig& config, Progress& progress,
                                      TrainStep& step, ChangeListener on_change) {
  train_size_ = step.train_size();
  batch_size_ = config.batch_size;
  seed_ = config.seed;
  progress_ = &progress;
  step_ = &step;
  on_change_ = std::move(on_change);
  // A member of the first generation starts its hook afresh; a process
  // admitted into a running job takes rank 0's.
  own_hook_state_ = group_.generation() == 0;
  if (absl::Status s = start_generation(); !s.ok()) {
    if (store_gone(s)) return s;
    if (absl::Status r = rebuild(s, 0); !r.ok()) return r;
  }
  steps_per_epoch_ = std::max<int64_t>(1, train_size_ / (batch_size_ * group_.size()));
  return absl::OkStatus();
}

void ElasticMembership::begin_epoch(int64_t epoch) {
  order_ = elastic::epoch_permutation(train_size_, seed_, epoch);
}

Batch ElasticMembership::next_batch() {
  slice_ = elastic::step_slice(train_size_, consumed_, group_.size(), group_.rank(),
                               batch_size_);
  return Batch{order_.data() + slice_.begin, slice_.end - slice_.begin, slice_.epoch_done};
}

absl::StatusOr<bool> ElasticMembership::vote(const absl::Status& synced) {
  voted_ = true;
  absl::StatusOr<elastic::CommitDecision> d = group_.should_commit(progress_->global_step, synced);
  if (!d.ok()) {
    vote_error_ = d.status();
    return d.status();
  }
  decision_ = *d;
  return d->commit;
}

absl::StatusOr<std::optional<double>> ElasticMembership::take_step(const Batch& batch, float lr) {
  voted_ = false;
  vote_error_ = absl::OkStatus();
  decision_ = {};
  step_->set_commit_gate([this](const absl::Status& synced) { return vote(synced); });
  absl::StatusOr<double> loss = step_->step(batch.samples, batch.size, lr);
  step_->set_commit_gate(nullptr);
  if (!vote_error_.ok()) return vote_error_;
  if (!loss.ok()) {
    // Discarded everywhere: say so if this rank has not voted yet, so the
    // others need not wait for it.
    if (!voted_) {
      absl::StatusOr<elastic::CommitDecision> d =
          group_.should_commit(progress_->global_step, loss.status());
      if (!d.ok()) return d.status();
    }
    if (absl::Status s = rebuild(loss.status(), 1); !s.ok()) return s;
    return std::optional<double>();
  }
  consumed_ = slice_.consumed_after;
  if (absl::Status s = snapshot_hook_state(); !s.ok()) return s;
  return std::optional<double>(*loss);
}

absl::Status ElasticMembership::after_step() {
  if (!decision_.admit) return absl::OkStatus();
  decision_.admit = false;
  return rebuild(absl::OkStatus(), 0);
}

void ElasticMembership::annotate(JsonLine& line) const {
  line.add("generation", group_.generation()).add("unix_ms", unix_ms());
}

absl::Status ElasticMembership::snapshot_hook_state() {
  std::ostringstream out;
  if (absl::Status s = step_->sync().save_state(out); !s.ok()) return s;
  hook_state_ = out.str();
  return absl::OkStatus();
}

absl::Status ElasticMembership::adopt_hook_state(const std::string& hook_state) {
  if (hook_state.empty()) return absl::OkStatus();
  std::istringstream in(hook_state);
  if (absl::Status s = step_->sync().load_state(in); !s.ok()) {
    return absl::Status(s.code(), "elastic: loading the hook state received from rank 0: " +
                                      std::string(s.message()));
  }
  step_->sync().drop_local_hook_state();
  own_hook_state_ = true;
  return snapshot_hook_state();
}

absl::Status ElasticMembership::start_generation() {
  absl::StatusOr<std::unique_ptr<GradientSync>> old = step_->reset_sync(group_.pg());
  if (!old.ok()) return old.status();
  group_.retire(std::shared_ptr<GradientSync>(*std::move(old)));
  // The hook state of the last committed step: a step that failed midway
  // may have advanced it on some ranks and not on others.
  if (!hook_state_.empty()) {
    std::istringstream in(hook_state_);
    if (absl::Status s = step_->sync().load_state(in); !s.ok()) return s;
  }
  if (!group_.has_newcomers()) return absl::OkStatus();
  ElasticPosition position{*progress_, consumed_};
  std::string blob;
  const bool sender = group_.rank() == 0;
  if (sender) {
    absl::StatusOr<std::string> saved = save_elastic_state(position, step_->state(), hook_state_);
    if (!saved.ok()) return saved.status();
    blob = *std::move(saved);
  }
  if (absl::Status s = elastic::broadcast_state(*group_.pg(), 0, &blob); !s.ok()) return s;
  if (sender) return absl::OkStatus();
  std::string hook_state;
  if (absl::Status s = load_elastic_state(blob, &position, step_->state(), &hook_state);
      !s.ok()) {
    return s;
  }
  *progress_ = position.progress;
  consumed_ = position.consumed;
  received_state_ = true;
  // A newcomer takes rank 0's hook state without rank 0's own residual;
  // the other members keep theirs.
  if (!own_hook_state_) return adopt_hook_state(hook_state);
  return absl::OkStatus();
}

absl::Status ElasticMembership::rebuild(absl::Status why, int64_t steps_lost) {
  const Clock::time_point t0 = Clock::now();
  std::string failed_starts;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<elastic::MembershipChange> change = group_.reform(why);
    if (!change.ok()) {
      below_minimum_ = below_minimum(change.status());
      return change.status();
    }
    if (absl::Status s = start_generation(); !s.ok()) {
      // A member died while the generation started: the next one forms
      // without it.
      if (store_gone(s) || attempt >= 8) return s;
      absl::StrAppendFormat(&failed_starts, "%sgeneration %lld did not start after %.3f s: %s",
                            failed_starts.empty() ? "" : "; ", (long long)change->generation,
                            seconds_since(t0), std::string(s.message()));
      why = s;
      continue;
    }
    MembershipReport report;
    report.generation = change->generation;
    report.world_size = change->size;
    report.members = change->members;
    report.left = change->left;
    report.joined = change->joined;
    report.global_step = progress_->global_step;
    report.recovery_s = seconds_since(t0);
    report.steps_lost = steps_lost;
    if (!why.ok()) report.cause = std::string(why.message());
    report.failed_starts = failed_starts;
    return on_change_(report);
  }
}

bool ElasticMembership::ends_with_committed_state(const absl::Status& error) const {
  return below_minimum_ && below_minimum(error);
}

absl::Status ElasticMembership::save_checkpoint(const CheckpointOptions& options,
                                                const Progress& progress) {
  if (group_.rank() != 0 && !below_minimum_) return absl::OkStatus();
  absl::StatusOr<std::string> blob =
      save_elastic_state(ElasticPosition{progress, consumed_}, step_->state(), hook_state_);
  if (!blob.ok()) return blob.status();
  absl::Status s = save_single_writer_checkpoint(options, progress.global_step, group_.rank(),
                                                 kElasticStateFile, *blob);
  if (absl::IsFailedPrecondition(s)) {
    // Another process of this job holds the folder (the one writing this
    // same last checkpoint, or a former rank 0 left out while stopped).
    fprintf(stderr, "warning: member %lld: checkpoint of step %lld not written here: %s\n",
            (long long)group_.member_id(), (long long)progress.global_step,
            std::string(s.message()).c_str());
    return absl::OkStatus();
  }
  return s;
}

absl::StatusOr<std::optional<Progress>> ElasticMembership::resume(
    const CheckpointOptions& options) {
  if (received_state_) return std::optional<Progress>();
  for (int attempt = 0;; ++attempt) {
    std::string blob;
    if (group_.rank() == 0) {
      std::string loaded;
      absl::StatusOr<std::optional<int64_t>> step = resume_single_writer_checkpoint(
          options, kElasticStateFile,
          [&](const std::string& path, const std::string& contents) -> absl::Status {
            ElasticPosition position;
            if (absl::Status s = load_elastic_state(contents, &position, step_->state());
                !s.ok()) {
              return absl::Status(s.code(), path + ": " + std::string(s.message()));
            }
            if (position.consumed < 0 || position.consumed > train_size_ ||
                position.progress.epoch < 0 || position.progress.global_step < 0) {
              return absl::InvalidArgumentError(absl::StrFormat(
                  "%s: field position: epoch %lld, step %lld, %lld samples of the epoch "
                  "consumed, out of range for a training set of %lld",
                  path, (long long)position.progress.epoch,
                  (long long)position.progress.global_step, (long long)position.consumed,
                  (long long)train_size_));
            }
            loaded = contents;
            return absl::OkStatus();
          });
      if (!step.ok()) {
        blob = absl::StrCat(std::string(1, kCheckpointError),
                            static_cast<int>(step.status().code()), "|",
                            step.status().message());
      } else if (!step->has_value()) {
        blob = std::string(1, kNoCheckpoint);
      } else {
        blob = std::string(1, kCheckpointState) + loaded;
      }
    }
    absl::Status sent = elastic::broadcast_state(*group_.pg(), 0, &blob);
    if (sent.ok()) {
      if (blob.empty() || blob[0] == kNoCheckpoint) return std::optional<Progress>();
      if (blob[0] == kCheckpointError) {
        const size_t bar = blob.find('|');
        int code = static_cast<int>(absl::StatusCode::kUnknown);
        absl::SimpleAtoi(blob.substr(1, bar - 1), &code);
        return absl::Status(static_cast<absl::StatusCode>(code),
                            absl::StrCat("resume (read by rank 0): ", blob.substr(bar + 1)));
      }
      ElasticPosition position;
      std::string hook_state;
      if (absl::Status s =
              load_elastic_state(blob.substr(1), &position, step_->state(), &hook_state);
          !s.ok()) {
        return s;
      }
      consumed_ = position.consumed;
      // Every rank, the writer's successor included, starts the hook's
      // residual afresh: the ranks' own residuals were not saved.
      if (absl::Status s = adopt_hook_state(hook_state); !s.ok()) return s;
      return std::optional<Progress>(position.progress);
    }
    // A member was lost while rank 0 sent it: the next generation takes
    // the checkpoint again (whoever is its rank 0).
    if (store_gone(sent) || attempt >= 8) return sent;
    if (absl::Status r = rebuild(sent, 0); !r.ok()) return r;
  }
}

}  // namespace ddpx::trainer
