#include "examples/nn/mlp.h"

#include <algorithm>

#include "core/little_endian.h"
#include "examples/nn/loss.h"
#include "examples/nn/serialize.h"

namespace ddpx::nn {

Mlp::Mlp(const MlpConfig& config) : config_(config) {
  Rng rng(config.seed);
  std::vector<int64_t> widths = {config.inputs};
  widths.insert(widths.end(), config.hidden.begin(), config.hidden.end());
  widths.push_back(config.classes);
  layers_.reserve(widths.size() - 1);
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    layers_.emplace_back("fc" + std::to_string(i), widths[i], widths[i + 1], rng,
                         params_);
  outputs_.resize(layers_.size());
}

std::vector<Parameter*> Mlp::parameter_list() {
  std::vector<Parameter*> out;
  for (size_t i = 0; i < params_.num_parameters(); ++i) out.push_back(&params_.parameter(i));
  return out;
}

int64_t Mlp::num_parameters() const {
  int64_t n = 0;
  for (size_t i = 0; i < params_.num_parameters(); ++i) n += params_.parameter(i).value.numel();
  return n;
}

const float* Mlp::forward(const float* x, int64_t batch) {
  input_ = x;
  batch_ = batch;
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<float>& out = outputs_[i];
    out.resize(static_cast<size_t>(batch * layers_[i].out_features()));
    layers_[i].forward(in, batch, out.data());
    if (i + 1 < layers_.size()) relu_forward(out.data(), static_cast<int64_t>(out.size()));
    in = out.data();
  }
  return outputs_.back().data();
}

double Mlp::backward(const int32_t* labels, const GradReadyFn& on_ready) {
  const int64_t last = static_cast<int64_t>(layers_.size()) - 1;
  grad_a_.resize(static_cast<size_t>(batch_ * config_.classes));
  const double loss = softmax_cross_entropy(outputs_.back().data(), labels,
                                            batch_, config_.classes, grad_a_.data());
  // grad_a_ holds d loss / d (output of layer i) on entry to iteration i.
  for (int64_t i = last; i >= 0; --i) {
    Linear& layer = layers_[i];
    const float* layer_input = i == 0 ? input_ : outputs_[i - 1].data();
    layer.backward_params(layer_input, grad_a_.data(), batch_);
    if (on_ready) {
      on_ready(layer.bias_index());
      on_ready(layer.weight_index());
    }
    if (i == 0) break;  // nobody needs d loss / d input
    grad_b_.resize(static_cast<size_t>(batch_ * layer.in_features()));
    layer.backward_input(grad_a_.data(), batch_, grad_b_.data());
    relu_backward(outputs_[i - 1].data(), grad_b_.data(),
                  static_cast<int64_t>(grad_b_.size()));
    std::swap(grad_a_, grad_b_);
  }
  return loss;
}

Mlp::Evaluation Mlp::evaluate(const float* x, const int32_t* labels, int64_t n,
                              int64_t batch) {
  Evaluation result;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t b = std::min(batch, n - start);
    const float* logits = forward(x + start * config_.inputs, b);
    result.correct += count_correct(logits, labels + start, b, config_.classes);
    result.loss_sum += softmax_cross_entropy(logits, labels + start, b,
                                             config_.classes, nullptr) * b;
  }
  return result;
}

absl::Status Mlp::save(std::ostream& out) const {
  little_endian::put_u64(out, params_.num_parameters());
  for (size_t i = 0; i < params_.num_parameters(); ++i)
    write_tensor(out, params_.parameter(i).name, params_.parameter(i).value);
  return out ? absl::OkStatus() : absl::DataLossError("model: write failed");
}

absl::Status Mlp::load(std::istream& in) {
  uint64_t count = 0;
  if (!little_endian::get_u64(in, &count) || count != params_.num_parameters()) {
    return absl::InvalidArgumentError(
        "model checkpoint holds " + std::to_string(count) +
        " parameters, this model has " + std::to_string(params_.num_parameters()) +
        " (different --hidden?)");
  }
  for (size_t i = 0; i < params_.num_parameters(); ++i) {
    const Parameter& p = params_.parameter(i);
    absl::Status s = read_tensor_into(in, p.name, p.value);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ddpx::nn
