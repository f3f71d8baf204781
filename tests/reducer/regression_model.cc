#include "tests/reducer/regression_model.h"

#include <algorithm>
#include <random>

namespace ddpx {
namespace reducer_test {
namespace {

// A deterministic value in [-1, 1) for (sample, slot): no shared RNG state,
// so any rank can produce any sample.
float synthetic(int64_t sample, int slot, uint32_t salt) {
  uint64_t h = static_cast<uint64_t>(sample) * 0x9E3779B97F4A7C15ull + slot * 0xBF58476D1CE4E5B9ull + salt;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<float>(h % 2000001) / 1000000.0f - 1.0f;
}

}  // namespace

Batch make_batch(int64_t first, int count, int in, int out) {
  Batch b;
  b.size = count;
  for (int i = 0; i < count; ++i) {
    int64_t s = first + i;
    float sum = 0;
    for (int j = 0; j < in; ++j) {
      float v = synthetic(s, j, 1);
      b.x.push_back(v);
      sum += v * (j + 1) / in;
    }
    // A learnable target: a fixed linear function of x plus noise.
    for (int k = 0; k < out; ++k) b.t.push_back(sum * (k + 1) * 0.5f + 0.1f * synthetic(s, k, 2));
  }
  return b;
}

Batch concat(const std::vector<Batch>& parts) {
  Batch b;
  for (const Batch& p : parts) {
    b.size += p.size;
    b.x.insert(b.x.end(), p.x.begin(), p.x.end());
    b.t.insert(b.t.end(), p.t.begin(), p.t.end());
  }
  return b;
}

RegressionModel::RegressionModel(ModelParameters& params, int in, int hidden, int out,
                                 uint32_t seed)
    : params_(params), in_(in), hidden_(hidden), out_(out) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  auto random_tensor = [&](Shape shape) {
    Tensor t = Tensor::zeros(shape, DType::kFloat32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(rng);
    return t;
  };
  params_.register_parameter("w1", random_tensor({hidden, in})).value();
  params_.register_parameter("b1", random_tensor({hidden})).value();
  params_.register_parameter("w2", random_tensor({out, hidden})).value();
  params_.register_parameter("b2", random_tensor({out})).value();
}

absl::StatusOr<float> RegressionModel::forward_backward(
    const Batch& batch, const std::function<absl::Status(size_t)>& ready,
    std::vector<size_t> ready_order, const std::vector<size_t>& skip) {
  if (ready_order.empty()) ready_order = {kB2, kW2, kB1, kW1};
  const float* w1 = params_.parameter(kW1).value.data_as<float>();
  const float* b1 = params_.parameter(kB1).value.data_as<float>();
  const float* w2 = params_.parameter(kW2).value.data_as<float>();
  const float* b2 = params_.parameter(kB2).value.data_as<float>();
  const int n = batch.size;
  std::vector<float> h(static_cast<size_t>(n) * hidden_), dy(static_cast<size_t>(n) * out_),
      dh(static_cast<size_t>(n) * hidden_, 0.0f);
  float loss = 0;
  for (int i = 0; i < n; ++i) {
    const float* x = &batch.x[static_cast<size_t>(i) * in_];
    for (int j = 0; j < hidden_; ++j) {
      float acc = b1[j];
      for (int k = 0; k < in_; ++k) acc += w1[j * in_ + k] * x[k];
      h[i * hidden_ + j] = acc;
    }
    for (int o = 0; o < out_; ++o) {
      float acc = b2[o];
      for (int j = 0; j < hidden_; ++j) acc += w2[o * hidden_ + j] * h[i * hidden_ + j];
      float e = acc - batch.t[static_cast<size_t>(i) * out_ + o];
      loss += 0.5f * e * e / n;
      dy[i * out_ + o] = e / n;
    }
    for (int j = 0; j < hidden_; ++j) {
      float acc = 0;
      for (int o = 0; o < out_; ++o) acc += w2[o * hidden_ + j] * dy[i * out_ + o];
      dh[i * hidden_ + j] = acc;
    }
  }
  // Each gradient is computed in full when its turn in ready_order comes.
  for (size_t p : ready_order) {
    if (std::find(skip.begin(), skip.end(), p) != skip.end()) continue;
    float* g = params_.parameter(p).grad.data_as<float>();
    for (int i = 0; i < n; ++i) {
      const float* x = &batch.x[static_cast<size_t>(i) * in_];
      switch (p) {
        case kB2:
          for (int o = 0; o < out_; ++o) g[o] += dy[i * out_ + o];
          break;
        case kW2:
          for (int o = 0; o < out_; ++o)
            for (int j = 0; j < hidden_; ++j) g[o * hidden_ + j] += dy[i * out_ + o] * h[i * hidden_ + j];
          break;
        case kB1:
          for (int j = 0; j < hidden_; ++j) g[j] += dh[i * hidden_ + j];
          break;
        case kW1:
          for (int j = 0; j < hidden_; ++j)
            for (int k = 0; k < in_; ++k) g[j * in_ + k] += dh[i * hidden_ + j] * x[k];
          break;
      }
    }
    if (absl::Status s = ready(p); !s.ok()) return s;
  }
  return loss;
}

void RegressionModel::sgd_step(float lr) {
  for (size_t p = 0; p < params_.num_parameters(); ++p) {
    Parameter& param = params_.parameter(p);
    float* v = param.value.data_as<float>();
    const float* g = param.grad.data_as<float>();
    for (int64_t i = 0; i < param.value.numel(); ++i) v[i] -= lr * g[i];
  }
  params_.zero_grad();
}

std::vector<float> RegressionModel::flat_values() const {
  std::vector<float> out;
  for (size_t p = 0; p < params_.num_parameters(); ++p) {
    std::vector<float> v = params_.parameter(p).value.to_float_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace reducer_test
}  // namespace ddpx
