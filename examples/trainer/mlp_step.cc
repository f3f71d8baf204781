#include "examples/trainer/mlp_step.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ddpx::trainer {

absl::StatusOr<std::unique_ptr<MlpStep>> MlpStep::create(const MlpOptions& o,
                                                         std::shared_ptr<ProcessGroup> pg,
                                                         const SyncFactory& make_sync) {
  // --train_limit: only those images are read (the test set stays whole).
  absl::StatusOr<data::Dataset> train = data::load_fashion_mnist(
      o.data_dir, data::Split::kTrain, o.train_limit > 0 ? o.train_limit : -1);
  if (!train.ok()) return train.status();
  absl::StatusOr<data::Dataset> test = data::load_fashion_mnist(o.data_dir, data::Split::kTest);
  if (!test.ok()) return test.status();
  std::unique_ptr<MlpStep> step(new MlpStep(o, *std::move(train), *std::move(test)));
  step->make_sync_ = make_sync;
  if (pg != nullptr) {
    absl::StatusOr<std::unique_ptr<GradientSync>> old = step->reset_sync(std::move(pg));
    if (!old.ok()) return old.status();
  }
  return step;
}

absl::StatusOr<std::unique_ptr<GradientSync>> MlpStep::reset_sync(
    std::shared_ptr<ProcessGroup> pg) {
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = make_sync_(model_, std::move(pg));
  if (!sync.ok()) return sync.status();
  std::unique_ptr<GradientSync> old = std::move(sync_);
  sync_ = *std::move(sync);
  return old;
}

MlpStep::MlpStep(const MlpOptions& o, data::Dataset train, data::Dataset test)
    : train_(std::move(train)),
      test_(std::move(test)),
      model_({train_.features, o.hidden, 10, o.seed}),
      optimizer_(model_.parameter_list(),
                 {o.lr, o.momentum, 0.0f, o.weight_decay, /*nesterov=*/false}),
      state_(model_, optimizer_) {}

std::string MlpStep::describe() const {
  std::string layers = absl::StrCat("MLP ", train_.features);
  for (int64_t h : model_.config().hidden) absl::StrAppend(&layers, "-", h);
  return absl::StrCat(layers, "-", model_.config().classes);
}

absl::StatusOr<double> MlpStep::step(const int64_t* samples, int64_t batch, float lr) {
  const int64_t features = train_.features;
  x_.resize(static_cast<size_t>(batch * features));
  y_.resize(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::copy_n(train_.images.data() + samples[b] * features, features, x_.data() + b * features);
    y_[b] = train_.labels[samples[b]];
  }
  model_.zero_grad();
  if (absl::Status s = sync_->prepare(); !s.ok()) return s;
  model_.forward(x_.data(), batch);
  const double loss = model_.backward(y_.data(), [&](size_t i) { sync_->mark_ready(i); });
  absl::StatusOr<bool> apply = commit(sync_->finish());
  if (!apply.ok()) return apply.status();
  if (!*apply) return absl::AbortedError("the step was not committed on every rank");
  optimizer_.options().lr = lr;
  optimizer_.step();
  return loss;
}

absl::StatusOr<EvalCounts> MlpStep::evaluate(int64_t begin, int64_t end) {
  nn::Mlp::Evaluation e = model_.evaluate(test_.images.data() + begin * test_.features,
                                          test_.labels.data() + begin, end - begin,
                                          /*batch=*/256);
  return EvalCounts{static_cast<double>(e.correct), e.loss_sum};
}

absl::StatusOr<std::vector<int64_t>> parse_hidden(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--hidden=%s: '%s' is not a positive layer width", text, std::string(part)));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace ddpx::trainer
