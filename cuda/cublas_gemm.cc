#include "cuda/cublas_gemm.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda/check.h"
#include "cuda/gemm_layout.h"
#include "cuda/stream.h"

namespace ddpx {

absl::StatusOr<CublasHandle> CublasHandle::create(int device) {
  DeviceGuard guard(device);
  if (!guard.status().ok()) return guard.status();
  CublasHandle h;
  DDPX_CUBLAS_RETURN_IF_ERROR(cublasCreate(&h.handle_));
  // Plain float32 math: no TF32, so results match the CPU path closely.
  DDPX_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(h.handle_, CUBLAS_PEDANTIC_MATH));
  return h;
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status gemm_row_major(cublasHandle_t handle, cudaStream_t stream, bool transpose_a,
                            bool transpose_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                            const float* a, const float* b, float* c) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (m > kIntMax || n > kIntMax || k > kIntMax || batch > kIntMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm: dimensions ", batch, " x (", m, " x ", k, ") x (", k, " x ", n,
        ") exceed cuBLAS's 32-bit sizes"));
  }
  if (batch == 0 || m == 0 || n == 0) return absl::OkStatus();
  const cuda_math::ColumnMajorGemm g = cuda_math::row_major_gemm(transpose_a, transpose_b, m, n, k);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  DDPX_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle, stream));
  const cublasOperation_t op_first = g.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    DDPX_CUBLAS_RETURN_IF_ERROR(cublasSgemm(
        handle, op_first, op_second, static_cast<int>(g.m), static_cast<int>(g.n),
        static_cast<int>(g.k), &alpha, b, static_cast<int>(g.ld_first), a,
        static_cast<int>(g.ld_second), &beta, c, static_cast<int>(g.ld_c)));
    return absl::OkStatus();
  }
  DDPX_CUBLAS_RETURN_IF_ERROR(cublasSgemmStridedBatched(
      handle, op_first, op_second, static_cast<int>(g.m), static_cast<int>(g.n),
      static_cast<int>(g.k), &alpha, b, static_cast<int>(g.ld_first), k * n, a,
      static_cast<int>(g.ld_second), m * k, &beta, c, static_cast<int>(g.ld_c), m * n,
      static_cast<int>(batch)));
  return absl::OkStatus();
}

}  // namespace ddpx
