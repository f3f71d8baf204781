// A small real model for the reducer tests: two linear layers and a
// squared-error loss, y = W2 (W1 x + b1) + b2, L = mean_i 0.5 |y_i - t_i|^2,
// with a hand-written backward that accumulates into the parameters'
// gradients and reports each one as soon as it is final (the role autograd
// hooks play in torch), last layer first.
#ifndef DDPX_TESTS_REDUCER_REGRESSION_MODEL_H_
#define DDPX_TESTS_REDUCER_REGRESSION_MODEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "reducer/model_parameters.h"

namespace ddpx {
namespace reducer_test {

struct Batch {
  int size = 0;
  std::vector<float> x;  // size * in
  std::vector<float> t;  // size * out
};

// Samples [first, first + count) of a fixed synthetic regression data set:
// the same sample index gives the same values everywhere.
Batch make_batch(int64_t first, int count, int in, int out);
// Concatenation (the union of several ranks' batches).
Batch concat(const std::vector<Batch>& parts);

class RegressionModel {
 public:
  // Parameter indices, in registration order.
  static constexpr size_t kW1 = 0, kB1 = 1, kW2 = 2, kB2 = 3;

  // Registers w1, b1, w2, b2 into `params`, initialized from `seed`.
  RegressionModel(ModelParameters& params, int in, int hidden, int out, uint32_t seed);

  // Forward and backward on `batch`: gradients are added into the
  // parameters' grads and `ready(i)` is called for each parameter once its
  // gradient is complete, in `ready_order` (default b2, w2, b1, w1). Indices
  // in `skip` get no gradient and no call (unused parameters). Returns the
  // loss, or the first error `ready` returned.
  absl::StatusOr<float> forward_backward(const Batch& batch,
                                         const std::function<absl::Status(size_t)>& ready,
                                         std::vector<size_t> ready_order = {},
                                         const std::vector<size_t>& skip = {});
  // value -= lr * grad, then zero the gradients.
  void sgd_step(float lr);

  std::vector<float> flat_values() const;
  ModelParameters& params() { return params_; }

 private:
  ModelParameters& params_;
  int in_, hidden_, out_;
};

}  // namespace reducer_test
}  // namespace ddpx

#endif  // DDPX_TESTS_REDUCER_REGRESSION_MODEL_H_
