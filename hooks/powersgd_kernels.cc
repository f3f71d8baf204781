#include "hooks/powersgd_kernels.h"

#include <cblas.h>

#include <vector>

namespace ddpx {

void matmul_m_q(const float* m, int64_t rows, int64_t cols, const float* q,
                int64_t rank, float* p) {
  // Rank 1 is a matrix-vector product; OpenBLAS's sgemv streams M about
  // three times faster than its sgemm, which packs M first.
  if (rank == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, m, cols, q, 1,
                0.0f, p, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, rank, cols, 1.0f,
              m, cols, q, rank, 0.0f, p, rank);
}

void matmul_mt_p(const float* m, int64_t rows, int64_t cols, const float* p,
                 int64_t rank, float* q) {
  if (rank == 1) {
    cblas_sgemv(CblasRowMajor, CblasTrans, rows, cols, 1.0f, m, cols, p, 1,
                0.0f, q, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, rank, rows, 1.0f,
              m, cols, p, rank, 0.0f, q, rank);
}

void matmul_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                 int64_t rank, float* m) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, rank, 1.0f,
              p, rank, q, rank, 0.0f, m, cols);
}

void decompress_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                     int64_t rank, float* out, float* e) {
  // Q^T (rank x cols) so the inner loops run over contiguous columns.
  std::vector<float> qt(static_cast<size_t>(rank * cols));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < rank; ++k) qt[k * cols + j] = q[j * rank + k];
  for (int64_t i = 0; i < rows; ++i) {
    // restrict: the row, its error and Q^T never overlap, which lets the
    // compiler keep the loops vectorized.
    float* __restrict o = out + i * cols;
    const float* __restrict q0 = qt.data();
    const float* pi = p + i * rank;
    const float p0 = pi[0];
    for (int64_t j = 0; j < cols; ++j) o[j] = p0 * q0[j];
    for (int64_t k = 1; k < rank; ++k) {
      const float pk = pi[k];
      const float* __restrict qk = qt.data() + k * cols;
      for (int64_t j = 0; j < cols; ++j) o[j] += pk * qk[j];
    }
    if (e != nullptr) {
      float* __restrict ei = e + i * cols;
      for (int64_t j = 0; j < cols; ++j) ei[j] -= o[j];
    }
  }
}

void add_inplace(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void subtract_inplace(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] -= src[i];
}

void divide_inplace(float* dst, float divisor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] /= divisor;
}

}  // namespace ddpx
