// A multi-layer perceptron: Linear -> ReLU -> ... -> Linear, ending in logits
// for softmax cross-entropy. Parameters are registered in layer order
// (fc0.weight, fc0.bias, fc1.weight, ...), as torch's nn.Sequential does.
#ifndef DDPX_EXAMPLES_NN_MLP_H_
#define DDPX_EXAMPLES_NN_MLP_H_

#include <cstdint>
#include <iosfwd>
#include <vector>

#include "absl/status/status.h"
#include "examples/nn/linear.h"
#include "examples/nn/parameter.h"

namespace ddpx::nn {

struct MlpConfig {
  int64_t inputs = 784;
  std::vector<int64_t> hidden = {2048, 2048};  // ~6M parameters with 784/10
  int64_t classes = 10;
  uint64_t seed = 0;
};

class Mlp {
 public:
  explicit Mlp(const MlpConfig& config);
  // Layers point into the parameter store: the model stays where it is.
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const MlpConfig& config() const { return config_; }
  // What DDP and the optimizer work on, in registration order.
  ParameterStore& parameters() { return params_; }
  // Pointers to every parameter (valid for the model's lifetime).
  std::vector<Parameter*> parameter_list();
  int64_t num_parameters() const;

  // x [batch, inputs] -> logits [batch, classes], owned by the model until
  // the next forward. `x` must stay alive until backward() returns.
  const float* forward(const float* x, int64_t batch);
  // Backpropagates mean softmax cross-entropy of the last forward against
  // `labels`; returns the loss. Gradients are added (+=) to each
  // Parameter::grad, as torch accumulates them (zero_grad() between steps),
  // and `on_ready(i)` is called for parameter i as soon as its gradient is
  // final: last layer first, bias before weight (reverse registration order).
  double backward(const int32_t* labels, const GradReadyFn& on_ready);
  void zero_grad() { params_.zero_grad(); }

  // Correct predictions and summed loss over `n` samples, in batches.
  struct Evaluation {
    int64_t correct = 0;
    double loss_sum = 0;
  };
  Evaluation evaluate(const float* x, const int32_t* labels, int64_t n,
                      int64_t batch);

  // Parameter values, by name and shape; load checks both.
  absl::Status save(std::ostream& out) const;
  absl::Status load(std::istream& in);

 private:
  MlpConfig config_;
  ParameterStore params_;
  std::vector<Linear> layers_;
  const float* input_ = nullptr;
  int64_t batch_ = 0;
  // outputs_[i]: output of layer i (after ReLU for hidden layers).
  std::vector<std::vector<float>> outputs_;
  std::vector<float> grad_a_, grad_b_;
};

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_MLP_H_
