// y = x Wᵀ + b on row-major float32 batches, with cblas_sgemm.
#ifndef DDPX_EXAMPLES_NN_LINEAR_H_
#define DDPX_EXAMPLES_NN_LINEAR_H_

#include <cstdint>

#include "examples/nn/init.h"
#include "examples/nn/parameter.h"

namespace ddpx::nn {

class Linear {
 public:
  // Registers `name`.weight [out, in] and `name`.bias [out] in `store`,
  // initialized like torch.nn.Linear.
  Linear(const std::string& name, int64_t in_features, int64_t out_features,
         Rng& rng, ParameterStore& store);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  size_t weight_index() const { return weight_index_; }
  size_t bias_index() const { return bias_index_; }

  // x [batch, in] -> y [batch, out].
  void forward(const float* x, int64_t batch, float* y) const;
  // From dy [batch, out] and the forward input x: adds to the weight's and
  // bias's gradients.
  void backward_params(const float* x, const float* dy, int64_t batch);
  // dx [batch, in] = dy W (overwritten).
  void backward_input(const float* dy, int64_t batch, float* dx) const;

 private:
  int64_t in_;
  int64_t out_;
  ParameterStore* store_;
  size_t weight_index_;
  size_t bias_index_;
};

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_LINEAR_H_
