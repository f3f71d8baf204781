// Stochastic gradient descent with momentum and weight decay, with the
// semantics of torch.optim.SGD:
//   g = grad + weight_decay * p
//   buf = g on the first step, else momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
#ifndef DDPX_EXAMPLES_NN_SGD_H_
#define DDPX_EXAMPLES_NN_SGD_H_

#include <cstdint>
#include <iosfwd>
#include <vector>

#include "absl/status/status.h"
#include "examples/nn/parameter.h"

namespace ddpx::nn {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class Sgd {
 public:
  Sgd(std::vector<Parameter*> params, SgdOptions options);

  void step();
  int64_t steps_taken() const { return steps_; }
  SgdOptions& options() { return options_; }

  // Momentum buffers and the step count (a resumed run continues exactly).
  absl::Status save_state(std::ostream& out) const;
  absl::Status load_state(std::istream& in);

 private:
  std::vector<Parameter*> params_;
  SgdOptions options_;
  std::vector<Tensor> momentum_;  // undefined until the first step
  int64_t steps_ = 0;
};

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_SGD_H_
