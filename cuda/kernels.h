// Launchers of the CUDA kernels (casts.cu, quantize.cu, orthogonalize.cu,
// elementwise.cu).
//
// This header is what nvcc and the C++ compiler share: it needs only
// <cuda_runtime_api.h>, and every launcher returns the cudaError_t of its
// launch (cudaGetLastError), which callers turn into absl::Status with
// DDPX_CUDA_RETURN_IF_ERROR. Launches are asynchronous on `stream`.
#ifndef DDPX_CUDA_KERNELS_H_
#define DDPX_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ddpx {
namespace cuda_kernels {

// float32 <-> float16 / bfloat16 (bit patterns in uint16_t), n elements.
cudaError_t cast_float_to_half(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);
cudaError_t cast_half_to_float(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);
cudaError_t cast_float_to_bfloat16(const float* in, uint16_t* out, int64_t n,
                                   cudaStream_t stream);
cudaError_t cast_bfloat16_to_float(const uint16_t* in, float* out, int64_t n,
                                   cudaStream_t stream);

// Min-max int8 quantization of `n` floats into `out` (quantize_math.h's
// layout, quantized_bytes(n, chunk) bytes), and back. dequantize_add adds
// the decoded values to `out` instead of overwriting it.
cudaError_t quantize_minmax(const float* in, int64_t n, int64_t chunk, uint8_t* out,
                            cudaStream_t stream);
cudaError_t dequantize_minmax(const uint8_t* in, int64_t n, int64_t chunk, float* out,
                              bool accumulate, cudaStream_t stream);

// Gram-Schmidt on `batch` row-major rows x cols matrices stored back to back
// (PowerSGD's P or Q), in place: columns become orthonormal.
cudaError_t orthogonalize_gram_schmidt(float* matrices, int batch, int64_t rows, int cols,
                                       float epsilon, cudaStream_t stream);

// Element-wise float32 (elementwise_math.h), n elements each:
// out = a + alpha * b (out may alias a or b); x = x / divisor; x = value.
cudaError_t add_scaled(const float* a, float alpha, const float* b, float* out, int64_t n,
                       cudaStream_t stream);
cudaError_t divide(float* x, float divisor, int64_t n, cudaStream_t stream);
cudaError_t fill(float* x, float value, int64_t n, cudaStream_t stream);

}  // namespace cuda_kernels
}  // namespace ddpx

#endif  // DDPX_CUDA_KERNELS_H_
