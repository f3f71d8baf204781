#include "examples/nn/linear.h"

#include <cblas.h>

#include <cstring>

namespace ddpx::nn {

Linear::Linear(const std::string& name, int64_t in_features,
               int64_t out_features, Rng& rng, ParameterStore& store)
    : in_(in_features), out_(out_features), store_(&store) {
  Tensor weight = Tensor::zeros({out_, in_}, DType::kFloat32);
  Tensor bias = Tensor::zeros({out_}, DType::kFloat32);
  init_uniform_fan_in(weight, in_, rng);
  init_uniform_fan_in(bias, in_, rng);
  // Names are unique by construction (the MLP numbers its layers).
  weight_index_ = store.register_parameter(name + ".weight", weight).value();
  bias_index_ = store.register_parameter(name + ".bias", bias).value();
}

void Linear::forward(const float* x, int64_t batch, float* y) const {
  const float* b = store_->parameter(bias_index_).value.data_as<float>();
  // Start y from the bias broadcast over rows, then accumulate x Wᵀ (beta 1).
  for (int64_t r = 0; r < batch; ++r) memcpy(y + r * out_, b, out_ * sizeof(float));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out_, in_, 1.0f,
              x, in_, store_->parameter(weight_index_).value.data_as<float>(), in_, 1.0f, y, out_);
}

void Linear::backward_params(const float* x, const float* dy, int64_t batch) {
  // dW += dyᵀ x : [out, batch] x [batch, in]. Read the grad handles now: DDP
  // may have swapped them for bucket views.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_, in_, batch, 1.0f,
              dy, out_, x, in_, 1.0f,
              store_->parameter(weight_index_).grad.data_as<float>(), in_);
  float* db = store_->parameter(bias_index_).grad.data_as<float>();
  for (int64_t r = 0; r < batch; ++r) {
    const float* row = dy + r * out_;
    for (int64_t j = 0; j < out_; ++j) db[j] += row[j];
  }
}

void Linear::backward_input(const float* dy, int64_t batch, float* dx) const {
  // dx = dy W : [batch, out] x [out, in].
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in_, out_, 1.0f,
              dy, out_, store_->parameter(weight_index_).value.data_as<float>(), in_, 0.0f, dx, in_);
}

}  // namespace ddpx::nn
