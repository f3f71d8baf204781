// DeviceKernels for CPU tensors: the reference implementation of the
// interface (cuda/device_kernels.h) that lets the device PowerSGD step
// (hooks/powersgd_device_step.h) run, and be compared with the CPU step,
// on a machine without a GPU.
//
// The element-wise operations run the CUDA kernels' own per-thread bodies
// (cuda/elementwise_math.h) as one thread covering the whole tensor, the
// casts the hooks' CPU casts (bit-identical to the CUDA casts, tested in
// //tests/cuda:kernel_math_test), orthogonalization the CPU Gram-Schmidt,
// and matmul a plain row-major loop (cuBLAS's contract, including batches).
// What this cannot show: anything about streams, cuBLAS's arguments or the
// kernels' launch; those need //tests/hooks:gpu_hooks_test on a GPU.
#ifndef DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_
#define DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_

#include <atomic>

#include "cuda/device_kernels.h"

namespace ddpx {

class HostDeviceKernels : public DeviceKernels {
 public:
  absl::Status cast(const Tensor& src, const Tensor& dst) override;
  absl::Status quantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst) override;
  absl::Status dequantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst,
                                 bool accumulate) override;
  absl::Status orthogonalize(const Tensor& matrices, float epsilon) override;
  absl::Status matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                      const Tensor& c) override;
  absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                          const Tensor& out) override;
  absl::Status divide(const Tensor& x, float divisor) override;
  absl::Status fill(const Tensor& x, float value) override;
  absl::Status copy(const Tensor& src, const Tensor& dst) override;
  absl::Status synchronize(Device device) override;

  // How many calls each kind got (the tests check that batching happens).
  std::atomic<int> matmul_calls{0};
  std::atomic<int> orthogonalize_calls{0};
};

}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_
