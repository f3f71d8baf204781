#include "reducer/control_tensor.h"

namespace ddpx {

Device control_device(const ModelParameters& model) {
  return model.num_parameters() > 0 ? model.parameter(0).value.device() : Device::cpu();
}

absl::StatusOr<Tensor> control_on_device(const Tensor& host, Device device) {
  if (device.is_cpu()) return host;
  absl::StatusOr<Tensor> copy = Tensor::empty(host.shape(), host.dtype(), device);
  if (!copy.ok()) return copy.status();
  if (absl::Status s = copy->copy_from(host); !s.ok()) return s;
  return copy;
}

absl::Status run_control_collective(
    const Tensor& host, Device device,
    const std::function<std::shared_ptr<Work>(const Tensor&)>& collective,
    std::chrono::milliseconds timeout) {
  absl::StatusOr<Tensor> sent = control_on_device(host, device);
  if (!sent.ok()) return sent.status();
  if (absl::Status s = collective(*sent)->wait(timeout); !s.ok()) return s;
  return host.copy_from(*sent);
}

}  // namespace ddpx
