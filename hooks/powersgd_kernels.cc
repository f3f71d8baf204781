#include "hooks/powersgd_kernels.h"

#include <cblas.h>

namespace ddpx {

void matmul_m_q(const float* m, int64_t rows, int64_t cols, const float* q,
                int64_t rank, float* p) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, rank, cols, 1.0f,
              m, cols, q, rank, 0.0f, p, rank);
}

void matmul_mt_p(const float* m, int64_t rows, int64_t cols, const float* p,
                 int64_t rank, float* q) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, rank, rows, 1.0f,
              m, cols, p, rank, 0.0f, q, rank);
}

void matmul_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                 int64_t rank, float* m) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, rank, 1.0f,
              p, rank, q, rank, 0.0f, m, cols);
}

void add_inplace(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void subtract_inplace(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] -= src[i];
}

void divide_inplace(float* dst, float divisor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] /= divisor;
}

}  // namespace ddpx
