// What tensor_bridge.h declares. The device conversion takes CUDA devices
// only in a build with DDPX_TORCH_CUDA (--config=cuda and a CUDA torch).
#include "reducer/torch/tensor_bridge.h"

#include <torch/types.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace torch {

absl::StatusOr<DType> to_ddpx(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", c10::toString(t), " is not supported (float32, float64, "
                       "float16, bfloat16, int8, uint8, int32, int64 are)"));
  }
}

c10::ScalarType to_torch(DType t) {
  switch (t) {
    case DType::kFloat32: return c10::ScalarType::Float;
    case DType::kFloat64: return c10::ScalarType::Double;
    case DType::kFloat16: return c10::ScalarType::Half;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
    case DType::kInt8: return c10::ScalarType::Char;
    case DType::kUInt8: return c10::ScalarType::Byte;
    case DType::kInt32: return c10::ScalarType::Int;
    case DType::kInt64: return c10::ScalarType::Long;
  }
  return c10::ScalarType::Undefined;
}

std::string describe(const at::Tensor& t) {
  return absl::StrCat(c10::toString(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ", "), "] on ",
                      t.device().str());
}

absl::StatusOr<Device> to_ddpx(const c10::Device& d, const std::string& what) {
  if (d.is_cpu()) return Device::cpu();
#ifdef DDPX_TORCH_CUDA
  if (d.is_cuda()) return Device::cuda(d.has_index() ? d.index() : 0);
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is on ", d.str(), "; ddpx::torch::DistributedDataParallel takes CPU and CUDA "
      "modules"));
#else
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is on ", d.str(), "; this build takes CPU modules (CUDA modules need "
      "--config=cuda and a CUDA build of torch)"));
#endif
}

c10::Device to_torch(const Device& d) {
  if (d.is_cuda()) return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(d.index));
  return c10::Device(c10::DeviceType::CPU);
}

// A ddpx Tensor over a torch tensor's memory (the caller keeps `t` alive).
absl::StatusOr<Tensor> borrow(const at::Tensor& t, const std::string& what) {
  absl::StatusOr<Device> device = to_ddpx(t.device(), what);
  if (!device.ok()) return device.status();
  if (!t.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not contiguous (", describe(t), "); make it contiguous before wrapping"));
  }
  absl::StatusOr<DType> dtype = to_ddpx(t.scalar_type());
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", dtype.status().message()));
  return Tensor::from_blob(t.data_ptr(), Shape(t.sizes().begin(), t.sizes().end()), *dtype,
                           *device);
}

// A torch tensor over a ddpx tensor's memory; keeps that storage alive.
at::Tensor as_torch(const Tensor& t) {
  std::shared_ptr<Storage> storage = t.storage();
  return ::torch::from_blob(
      t.data(), std::vector<int64_t>(t.shape().begin(), t.shape().end()),
      [storage](void*) {},
      at::TensorOptions().dtype(to_torch(t.dtype())).device(to_torch(t.device())));
}

}  // namespace torch
}  // namespace ddpx
