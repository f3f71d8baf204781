// The compute the hooks need, behind one interface, the way DeviceAllocator
// hides device memory: hooks/ stays plain C++ and every hook computes
// through the kernels of its bucket's device,
//
//   absl::StatusOr<DeviceKernels*> k = kernels_for(buffer, "fp16 hook");
//   (*k)->cast_scaled(src, world_size, dst);
//
// (hooks/bucket_math.h): hooks/host_kernels.h for CPU tensors, and for
// tensors on CUDA:i what //cuda:device_kernels_cuda registers here when
// linked (--config=cuda); a build without it has no kernels for CUDA
// (device_kernels() returns null). The argument checks are plain C++
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
  // ---- element-wise (cuda/elementwise_math.h) ----
  // out = a + alpha * b (out may be a or b), float32; one device, one numel.
  virtual absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                                  const Tensor& out) = 0;
  // x = x / divisor, in place (a true division, as torch's div_): float32,
  // and float16/bfloat16 widened, divided in float32 and rounded once to
  // nearest even (divide_16bit_in_float32 below); the host also divides
  // float64.
  virtual absl::Status divide(const Tensor& x, float divisor) = 0;
  // x = value, float32.
  virtual absl::Status fill(const Tensor& x, float value) = 0;
  // Every byte of x = 0 (any dtype).
  virtual absl::Status zero(const Tensor& x) = 0;
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
  // ---- int8 records, for ByteGrad (hooks/bytegrad.h) ----
  // One record (cuda/quantize_math.h's layout) of float32 `src` / divisor
  // into the first quantized_record_bytes(src.numel()) bytes of the uint8
  // `dst`; the rest of `dst` (a slot sized for a longer chunk) is zeroed,
  // so a slot sent whole carries no stale memory. An empty `src` writes the
  // header {0, 0}. The same bytes as divide() then quantize_minmax(), as
  // the CPU kernels' quantize_divided: an average is quantized straight
  // from its sum.
  virtual absl::Status quantize_divided(const Tensor& src, float divisor, const Tensor& dst);
  // float32 dst = the sum of `count` records of dst.numel() values each,
  // record i at byte i * stride of the uint8 `records`, decoded and added
  // in record order: the same float adds as zeroing dst and decoding each
  // record with accumulate.
  virtual absl::Status dequantize_sum(const Tensor& records, int count, int64_t stride,
                                      const Tensor& dst);

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

 protected:
  // divide() of a float16/bfloat16 `x` from the float32 operations: widened
  // into a float32 copy, divided, cast back (one rounding, as the host).
  absl::Status divide_16bit_in_float32(const Tensor& x, float divisor);
};

void register_device_kernels(Device::Type type, DeviceKernels* kernels);
DeviceKernels* device_kernels(Device::Type type);  // null if none registered

// ---- argument checks (plain C++) -------------------------------------------

// src and dst on one device, same numel, one float32 and the other
// float16/bfloat16.
absl::Status check_cast(const Tensor& src, const Tensor& dst);
absl::Status check_quantize(const Tensor& src, int64_t chunk, const Tensor& dst);
absl::Status check_dequantize(const Tensor& src, int64_t chunk, const Tensor& dst);
// quantize_divided's arguments: float32 src, uint8 dst of at least one
// record of src.numel() values, a positive divisor, one device.
absl::Status check_quantize_divided(const Tensor& src, float divisor, const Tensor& dst);
// dequantize_sum's: count >= 1 records of dst.numel() values, `stride`
// bytes apart (at least a record), inside `records`; float32 dst.
absl::Status check_dequantize_sum(const Tensor& records, int count, int64_t stride,
                                  const Tensor& dst);

// add_scaled / fill / copy / zero: defined tensors on one device with the
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
