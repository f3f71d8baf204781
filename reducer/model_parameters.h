// What a model hands to DistributedDataParallel: its parameters (a value and
// a gradient tensor each) and buffers (state that is not trained, e.g.
// running statistics), registered in order.
//
// The registration order matters: DDP buckets gradients in reverse
// registration order (the order backward usually produces them), and every
// rank must register the same shapes and dtypes in the same order.
//
// Gradients accumulate: the model's backward adds (+=) into `grad`, and the
// training loop zeroes them after each optimizer step (zero_grad()), as in
// torch. That is what makes no_sync() accumulation work.
//
// With gradient_as_bucket_view, DDP replaces `grad` with a view into a bucket
// buffer. Read and write gradients through the Parameter (or its index), not
// through a copy of the Tensor handle taken before DDP was constructed.
#ifndef DDPX_REDUCER_MODEL_PARAMETERS_H_
#define DDPX_REDUCER_MODEL_PARAMETERS_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ddpx {

struct Parameter {
  std::string name;
  Tensor value;
  // Same shape, dtype and device as `value`; defined for every parameter.
  Tensor grad;
  // Frozen parameters (false) are broadcast at construction but get no
  // bucket and must not be marked ready.
  bool requires_grad = true;
};

struct Buffer {
  std::string name;
  Tensor value;
};

class ModelParameters {
 public:
  // Registers a parameter with a zero gradient; returns its index. Errors on
  // an empty or duplicate name or an undefined tensor.
  absl::StatusOr<size_t> register_parameter(const std::string& name, Tensor value,
                                            bool requires_grad = true);
  absl::StatusOr<size_t> register_buffer(const std::string& name, Tensor value);

  size_t num_parameters() const { return params_.size(); }
  size_t num_buffers() const { return buffers_.size(); }
  // References stay valid as more are registered (deque).
  Parameter& parameter(size_t i) { return params_[i]; }
  const Parameter& parameter(size_t i) const { return params_[i]; }
  Buffer& buffer(size_t i) { return buffers_[i]; }
  const Buffer& buffer(size_t i) const { return buffers_[i]; }
  absl::StatusOr<size_t> parameter_index(const std::string& name) const;

  // Zeroes every gradient in place (views stay views).
  void zero_grad();

 private:
  absl::Status check_new_name(const std::string& name, const Tensor& value) const;

  std::deque<Parameter> params_;
  std::deque<Buffer> buffers_;
};

}  // namespace ddpx

#endif  // DDPX_REDUCER_MODEL_PARAMETERS_H_
