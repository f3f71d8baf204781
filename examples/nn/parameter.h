// Trainable tensors and their gradients: the model registers its parameters
// in DDP's ModelParameters (reducer/model_parameters.h), so the reducer and
// the optimizer read the very tensors backward writes.
#ifndef DDPX_EXAMPLES_NN_PARAMETER_H_
#define DDPX_EXAMPLES_NN_PARAMETER_H_

#include <cstddef>
#include <functional>

#include "reducer/model_parameters.h"

namespace ddpx::nn {

// name, value, grad (backward adds into it; DDP may make it a bucket view),
// requires_grad.
using Parameter = ddpx::Parameter;
// Registration order, stable references, zero_grad().
using ParameterStore = ddpx::ModelParameters;

// Called by backward as soon as gradient `param_index` (registration order)
// holds its final value for this backward. This is where DDP's
// mark_ready plugs in.
using GradReadyFn = std::function<void(size_t param_index)>;

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_PARAMETER_H_
