// Between libtorch's tensors and ddpx's: dtype and device conversions, and
// tensors that share memory across the two (no copies). Used by
// ddpx::torch::DistributedDataParallel to mirror a module's parameters,
// gradients and buffers into ddpx Tensors and to hand bucket views back to
// autograd; includes torch, so only targets built with torch_cc_library
// (build_defs/torch.bzl) use it.
#ifndef DDPX_REDUCER_TORCH_TENSOR_BRIDGE_H_
#define DDPX_REDUCER_TORCH_TENSOR_BRIDGE_H_

#include <ATen/ATen.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ddpx {
namespace torch {

// torch's dtype as ddpx's; an error names the dtype and the supported ones.
absl::StatusOr<DType> to_ddpx(c10::ScalarType t);
c10::ScalarType to_torch(DType t);

// The CPU, or (in a build with DDPX_TORCH_CUDA) a CUDA device; an error
// names `what` and the device.
absl::StatusOr<Device> to_ddpx(const c10::Device& d, const std::string& what);
c10::Device to_torch(const Device& d);

// "float[3, 4] on cpu", for error messages.
std::string describe(const at::Tensor& t);

// A ddpx Tensor over a torch tensor's memory (the caller keeps `t` alive).
// `t` must be contiguous, of a supported dtype and device; the error names
// `what`.
absl::StatusOr<Tensor> borrow(const at::Tensor& t, const std::string& what);

// A torch tensor over a ddpx tensor's memory; keeps that storage alive.
at::Tensor as_torch(const Tensor& t);

}  // namespace torch
}  // namespace ddpx

#endif  // DDPX_REDUCER_TORCH_TENSOR_BRIDGE_H_
