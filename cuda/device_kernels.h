// The compute the hooks need on a device, behind one interface, the way
// DeviceAllocator hides device memory: hooks/ stays plain C++ and calls
//
//   DeviceKernels* k = device_kernels(Device::Type::kCUDA);
//   if (k == nullptr) -> error "built without --config=cuda"
//   k->cast(src, dst);
//
// for tensors on CUDA:i. //cuda:device_kernels_cuda registers the CUDA
// implementation when linked (--config=cuda); hooks/host_kernels.h is the
// implementation for CPU tensors. The argument checks are plain C++
// (check_* below) so they are tested on the CPU.
//
// Every operation is asynchronous on the current stream of the tensors'
// device (cuda/stream.h); synchronize() waits for it.
#ifndef DDPX_CUDA_DEVICE_KERNELS_H_
#define DDPX_CUDA_DEVICE_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ddpx {

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  // float32 -> float16/bfloat16 or back; dst's dtype says which.
  virtual absl::Status cast(const Tensor& src, const Tensor& dst) = 0;
  // float32 `src` -> uint8 `dst` of quantized_bytes(numel, chunk) bytes, in
  // hooks/kernels/cpu_kernels.h's record format, one record per chunk.
  virtual absl::Status quantize_minmax(const Tensor& src, int64_t chunk,
                                       const Tensor& dst) = 0;
  // Decodes into float32 `dst` (adds to it when accumulate).
  virtual absl::Status dequantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst,
                                         bool accumulate) = 0;
  // Makes the columns of each rows x cols matrix orthonormal (Gram-Schmidt),
  // `matrices` shaped [rows, cols] or [batch, rows, cols].
  virtual absl::Status orthogonalize(const Tensor& matrices, float epsilon) = 0;
  // c = op(a) op(b), float32, 2-D or batched 3-D with one batch size.
  virtual absl::Status matmul(const Tensor& a, bool transpose_a, const Tensor& b,
                              bool transpose_b, const Tensor& c) = 0;
  // ---- element-wise float32 (cuda/elementwise_math.h), for PowerSGD ----
  // out = a + alpha * b (out may be a or b); one device, one numel.
  virtual absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                                  const Tensor& out) = 0;
  // x = x / divisor, in place.
  virtual absl::Status divide(const Tensor& x, float divisor) = 0;
  // x = value.
  virtual absl::Status fill(const Tensor& x, float value) = 0;
  // dst = src (same dtype and numel, same device), ordered on the stream
  // like the kernels: unlike Tensor::copy_from, the host does not wait.
  virtual absl::Status copy(const Tensor& src, const Tensor& dst) = 0;
  // Waits for everything issued on `device`'s current stream.
  virtual absl::Status synchronize(Device device) = 0;

  // ---- composites, for the PowerSGD pipeline (hooks/powersgd_step.h) ----
  // The defaults (device_kernels.cc) are built from the operations above;
  // an implementation overrides one where a single pass is faster (the
  // host's, hooks/host_kernels.h, whose PowerSGD step is memory-bound).
  //
  // dst (float16/bfloat16) = src (float32) / divisor, divided in float32
  // and rounded once; divisor 1 is cast().
  virtual absl::Status cast_scaled(const Tensor& src, float divisor, const Tensor& dst);
  // orthogonalize(), and how many all-zero columns it set to zeros (with
  // epsilon 0), or -1 where the kernels cannot tell without waiting for the
  // device (the default).
  virtual absl::StatusOr<int> orthogonalize_counting(const Tensor& matrices, float epsilon);
  // m += input, then p = m q: m and input [rows, cols], q [cols, rank],
  // p [rows, rank], or batched with a leading dimension.
  virtual absl::Status add_then_matmul(const Tensor& m, const Tensor& input, const Tensor& q,
                                       const Tensor& p);
  // out = p q^T (p [rows, rank], q [cols, rank], out [rows, cols], or
  // batched), then error -= out where `error` (shaped like out) is defined.
  virtual absl::Status matmul_then_subtract(const Tensor& p, const Tensor& q, const Tensor& out,
                                            const Tensor& error);
};

void register_device_kernels(Device::Type type, DeviceKernels* kernels);
DeviceKernels* device_kernels(Device::Type type);  // null if none registered

// ---- argument checks (plain C++) -------------------------------------------

// src and dst on one device, same numel, one float32 and the other
// float16/bfloat16.
absl::Status check_cast(const Tensor& src, const Tensor& dst);
absl::Status check_quantize(const Tensor& src, int64_t chunk, const Tensor& dst);
absl::Status check_dequantize(const Tensor& src, int64_t chunk, const Tensor& dst);

// add_scaled / divide / fill / copy: defined tensors on one device with the
// same numel; float32 for the arithmetic (`float32_only`), any one dtype for
// copy. `b` may be undefined for the one-tensor operations.
absl::Status check_elementwise(const char* what, const Tensor& a, const Tensor& b,
                               bool float32_only);

struct MatrixBatch {
  int64_t batch, rows, cols;
};
// [rows, cols] or [batch, rows, cols] float32.
absl::StatusOr<MatrixBatch> check_matrices(const Tensor& t, const char* what);

struct MatmulShape {
  int64_t batch, m, n, k;
};
absl::StatusOr<MatmulShape> check_matmul(const Tensor& a, bool transpose_a, const Tensor& b,
                                         bool transpose_b, const Tensor& c);

}  // namespace ddpx

#endif  // DDPX_CUDA_DEVICE_KERNELS_H_
