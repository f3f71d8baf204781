// DeviceKernels (cuda/device_kernels.h) for CPU tensors: the host's
// implementation of the interface the hooks compute through
// (kernels_for() in bucket_math.h gives it for CPU buckets), so that one
// code path per hook runs on the CPU and on a device.
//
// It is the CPU hooks' own arithmetic behind the interface, not a model of
// the CUDA kernels: the products are PowerSGD's streaming kernels
// (powersgd_kernels.h; OpenBLAS above their ranks), orthogonalization the
// CPU Gram-Schmidt, casts and int8 records the vectorized CPU kernels
// (hooks/kernels/cpu_kernels.h, which the CUDA kernels match bit for bit),
// the element-wise operations the CUDA kernels' per-element math
// (cuda/elementwise_math.h) or, where it is the same arithmetic, the
// vectorized loops. The fused operations are overridden with single passes
// (the CPU's memory traffic is what a PowerSGD step and an int8 exchange
// cost): over M for PowerSGD, over a chunk for ByteGrad's quantize_divided
// and dequantize_sum (cpu_kernels.h's fused kernels). Every
// operation runs at once on the calling thread; synchronize() has nothing
// to wait for.
#ifndef DDPX_HOOKS_HOST_KERNELS_H_
#define DDPX_HOOKS_HOST_KERNELS_H_

#include "cuda/device_kernels.h"

namespace ddpx {

class HostKernels : public DeviceKernels {
 public:
  absl::Status cast(const Tensor& src, const Tensor& dst) override;
  absl::Status cast_scaled(const Tensor& src, float divisor, const Tensor& dst) override;
  absl::Status quantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst) override;
  absl::Status dequantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst,
                                 bool accumulate) override;
  absl::Status quantize_divided(const Tensor& src, float divisor, const Tensor& dst) override;
  absl::Status dequantize_sum(const Tensor& records, int count, int64_t stride,
                              const Tensor& dst) override;
  absl::Status orthogonalize(const Tensor& matrices, float epsilon) override;
  absl::StatusOr<int> orthogonalize_counting(const Tensor& matrices, float epsilon) override;
  absl::Status matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                      const Tensor& c) override;
  absl::Status add_then_matmul(const Tensor& m, const Tensor& input, const Tensor& q,
                               const Tensor& p) override;
  absl::Status matmul_then_subtract(const Tensor& p, const Tensor& q, const Tensor& out,
                                    const Tensor& error) override;
  absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                          const Tensor& out) override;
  absl::Status divide(const Tensor& x, float divisor) override;
  absl::Status fill(const Tensor& x, float value) override;
  absl::Status zero(const Tensor& x) override;
  absl::Status copy(const Tensor& src, const Tensor& dst) override;
  absl::Status synchronize(Device device) override;
};

// The process's HostKernels (stateless: one serves every thread).
DeviceKernels& host_kernels();

}  // namespace ddpx

#endif  // DDPX_HOOKS_HOST_KERNELS_H_
