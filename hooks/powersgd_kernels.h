// The arithmetic of one PowerSGD step on row-major float matrices.
//
// At PowerSGD's ranks (1..4) every product is a memory-bound pass over M, so
// what counts is how often M crosses the memory bus, not the flops. The two
// products that compress (P = M Q, Q = M^T P) are streaming loops that read
// each row of M once (OpenBLAS's sgemm with n = 2..4 packs M first, and its
// sgemv cannot take the error-feedback addition into the same pass); above
// kStreamingMaxRank they go through OpenBLAS's sgemm. Decompression and the
// element-wise passes are loops the compiler vectorizes (the target builds
// with -ftree-vectorize). Where the CPU has AVX2, P = M Q and decompression
// at ranks 3-4 run as intrinsics instead (GCC kept their accumulators on
// the stack). Summation orders are fixed by the code (8 partial sums per dot
// product, rows in order), never by blocking or threads, and the AVX2 path
// performs the portable path's operations in the same order without FMA, so
// a step is deterministic and gives the same bits on every x86-64 CPU.
#ifndef DDPX_HOOKS_POWERSGD_KERNELS_H_
#define DDPX_HOOKS_POWERSGD_KERNELS_H_

#include <cstdint>

namespace ddpx {

// Ranks up to this run through the streaming loops; larger ones through sgemm.
inline constexpr int64_t kStreamingMaxRank = 4;

// P (rows x rank) = M (rows x cols) * Q (cols x rank).
void matmul_m_q(const float* m, int64_t rows, int64_t cols, const float* q,
                int64_t rank, float* p);
// Error feedback fused into P = M Q: M += INPUT (M is the error buffer and
// becomes input + error), then P = M Q, row by row, so each row of the
// error and of the input crosses the memory bus once for both.
void add_then_matmul_m_q(float* m, const float* input, int64_t rows, int64_t cols,
                         const float* q, int64_t rank, float* p);
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

// For tests: true makes the kernels above take their portable (SSE2) path
// even where the CPU has AVX2, so a test can compare the two paths' bits.
// Set it while no kernel runs.
void use_portable_powersgd_kernels_for_testing(bool portable);

// dst[i] += src[i].
void add_inplace(float* dst, const float* src, int64_t n);
// dst[i] -= src[i].
void subtract_inplace(float* dst, const float* src, int64_t n);
// dst[i] /= divisor (a division, as torch's div_, not a multiply by 1/divisor).
void divide_inplace(float* dst, float divisor, int64_t n);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_KERNELS_H_
