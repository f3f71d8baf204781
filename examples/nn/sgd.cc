#include "examples/nn/sgd.h"

#include <istream>
#include <ostream>

#include "examples/nn/serialize.h"

namespace ddpx::nn {

Sgd::Sgd(std::vector<Parameter*> params, SgdOptions options)
    : params_(std::move(params)), options_(options), momentum_(params_.size()) {}

void Sgd::step() {
  const SgdOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    float* p = params_[i]->value.data_as<float>();
    const float* grad = params_[i]->grad.data_as<float>();
    const int64_t n = params_[i]->value.numel();
    float* buf = nullptr;
    const bool first = !momentum_[i].defined();
    if (o.momentum != 0.0f) {
      if (first) momentum_[i] = Tensor::zeros(params_[i]->value.shape(), DType::kFloat32);
      buf = momentum_[i].data_as<float>();
    }
    for (int64_t k = 0; k < n; ++k) {
      float g = grad[k] + o.weight_decay * p[k];
      if (buf != nullptr) {
        buf[k] = first ? g : o.momentum * buf[k] + (1.0f - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[k] : buf[k];
      }
      p[k] -= o.lr * g;
    }
  }
  ++steps_;
}

absl::Status Sgd::save_state(std::ostream& out) const {
  write_u64(out, static_cast<uint64_t>(steps_));
  write_u64(out, params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    write_u64(out, momentum_[i].defined() ? 1 : 0);
    if (momentum_[i].defined())
      write_tensor(out, params_[i]->name + ".momentum", momentum_[i]);
  }
  return out ? absl::OkStatus() : absl::DataLossError("optimizer: write failed");
}

absl::Status Sgd::load_state(std::istream& in) {
  uint64_t steps = 0, count = 0;
  if (!read_u64(in, &steps) || !read_u64(in, &count))
    return absl::DataLossError("optimizer checkpoint is truncated");
  if (count != params_.size()) {
    return absl::InvalidArgumentError(
        "optimizer checkpoint holds " + std::to_string(count) +
        " parameters, this model has " + std::to_string(params_.size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    uint64_t has = 0;
    if (!read_u64(in, &has)) return absl::DataLossError("optimizer checkpoint is truncated");
    if (has == 0) {
      momentum_[i] = Tensor();
      continue;
    }
    momentum_[i] = Tensor::zeros(params_[i]->value.shape(), DType::kFloat32);
    absl::Status s = read_tensor_into(in, params_[i]->name + ".momentum", momentum_[i]);
    if (!s.ok()) return s;
  }
  steps_ = static_cast<int64_t>(steps);
  return absl::OkStatus();
}

}  // namespace ddpx::nn
