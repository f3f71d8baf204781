// The arithmetic of one PowerSGD step on row-major float matrices. The two
// products that compress (P = M Q, Q = M^T P) go through OpenBLAS: sgemm, or
// sgemv at rank 1. Decompression and the element-wise passes are loops the
// compiler vectorizes (the target builds with -ftree-vectorize).
#ifndef DDPX_HOOKS_POWERSGD_KERNELS_H_
#define DDPX_HOOKS_POWERSGD_KERNELS_H_

#include <cstdint>

namespace ddpx {

// P (rows x rank) = M (rows x cols) * Q (cols x rank).
void matmul_m_q(const float* m, int64_t rows, int64_t cols, const float* q,
                int64_t rank, float* p);
// Q (cols x rank) = M^T * P (rows x rank).
void matmul_mt_p(const float* m, int64_t rows, int64_t cols, const float* p,
                 int64_t rank, float* q);
// M (rows x cols) = P (rows x rank) * Q^T (rank x cols).
void matmul_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                 int64_t rank, float* m);

// Decompression fused with error feedback, one sweep over the matrix:
// OUT = P * Q^T and, if `e` is non-null, E -= OUT (the new error). Written
// out rather than through sgemm: at PowerSGD's small ranks this is an
// element-wise pass (rank multiply-adds per element), where OpenBLAS's
// packing costs more than the arithmetic.
void decompress_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                     int64_t rank, float* out, float* e);

// dst[i] += src[i].
void add_inplace(float* dst, const float* src, int64_t n);
// dst[i] -= src[i].
void subtract_inplace(float* dst, const float* src, int64_t n);
// dst[i] /= divisor (a division, as torch's div_, not a multiply by 1/divisor).
void divide_inplace(float* dst, float divisor, int64_t n);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_KERNELS_H_
