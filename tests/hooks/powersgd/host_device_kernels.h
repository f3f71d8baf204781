// The host kernels (hooks/host_kernels.h) with call counts, for the tests
// that run the PowerSGD step (hooks/powersgd_step.h) with a device's memory
// layout on the CPU and check that same-shape matrices go to the kernels as
// one batch.
// What this cannot show: anything about streams, cuBLAS's arguments or the
// CUDA kernels' launch; those need //tests/hooks:gpu_hooks_test on a GPU.
#ifndef DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_
#define DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_

#include <atomic>

#include "hooks/host_kernels.h"

namespace ddpx {

class HostDeviceKernels : public HostKernels {
 public:
  absl::Status matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                      const Tensor& c) override {
    ++matmul_calls;
    return HostKernels::matmul(a, transpose_a, b, transpose_b, c);
  }
  absl::Status add_then_matmul(const Tensor& m, const Tensor& input, const Tensor& q,
                               const Tensor& p) override {
    ++matmul_calls;
    return HostKernels::add_then_matmul(m, input, q, p);
  }
  absl::Status matmul_then_subtract(const Tensor& p, const Tensor& q, const Tensor& out,
                                    const Tensor& error) override {
    ++matmul_calls;
    return HostKernels::matmul_then_subtract(p, q, out, error);
  }
  absl::StatusOr<int> orthogonalize_counting(const Tensor& matrices, float epsilon) override {
    ++orthogonalize_calls;
    return HostKernels::orthogonalize_counting(matrices, epsilon);
  }

  // Calls of each kind: the products (with or without a fused addition or
  // subtraction) and the orthogonalizations.
  std::atomic<int> matmul_calls{0};
  std::atomic<int> orthogonalize_calls{0};
};

}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_POWERSGD_HOST_DEVICE_KERNELS_H_
