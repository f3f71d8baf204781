// Row-major float32 GEMMs on cuBLAS (gemm_layout.h does the column-major
// translation), batched with cublasSgemmStridedBatched when several
// same-shape products go together (PowerSGD's batch_tensors_with_same_shape).
#ifndef DDPX_CUDA_CUBLAS_GEMM_H_
#define DDPX_CUDA_CUBLAS_GEMM_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {

class CublasHandle {
 public:
  static absl::StatusOr<CublasHandle> create(int device);
  CublasHandle() = default;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  ~CublasHandle();
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// C[i] = op(A[i]) op(B[i]) for i < batch; every matrix row-major, the i-th
// of each at i * (its rows * cols) floats from the start. op(A) is m x k,
// op(B) k x n, C m x n. Runs on `stream`.
absl::Status gemm_row_major(cublasHandle_t handle, cudaStream_t stream, bool transpose_a,
                            bool transpose_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                            const float* a, const float* b, float* c);

}  // namespace ddpx

#endif  // DDPX_CUDA_CUBLAS_GEMM_H_
