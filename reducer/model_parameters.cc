#include "reducer/model_parameters.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status ModelParameters::check_new_name(const std::string& name,
                                             const Tensor& value) const {
  if (name.empty()) return absl::InvalidArgumentError("parameter or buffer name is empty");
  if (!value.defined()) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "': tensor is undefined"));
  }
  for (const Parameter& p : params_) {
    if (p.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("'", name, "' is already registered as a parameter"));
    }
  }
  for (const Buffer& b : buffers_) {
    if (b.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("'", name, "' is already registered as a buffer"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ModelParameters::register_parameter(const std::string& name,
                                                           Tensor value,
                                                           bool requires_grad) {
  if (absl::Status s = check_new_name(name, value); !s.ok()) return s;
  absl::StatusOr<Tensor> grad = Tensor::empty(value.shape(), value.dtype(), value.device());
  if (!grad.ok()) return grad.status();
  grad->zero_();
  params_.push_back(Parameter{name, std::move(value), std::move(*grad), requires_grad});
  return params_.size() - 1;
}

absl::StatusOr<size_t> ModelParameters::register_buffer(const std::string& name,
                                                        Tensor value) {
  if (absl::Status s = check_new_name(name, value); !s.ok()) return s;
  buffers_.push_back(Buffer{name, std::move(value)});
  return buffers_.size() - 1;
}

absl::StatusOr<size_t> ModelParameters::parameter_index(const std::string& name) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) return i;
  }
  return absl::NotFoundError(absl::StrCat("no parameter named '", name, "'"));
}

void ModelParameters::zero_grad() {
  for (Parameter& p : params_) p.grad.zero_();
}

}  // namespace ddpx
