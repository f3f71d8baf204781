#include "hooks/powersgd_kernels.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace ddpx {

namespace {

// Each hot loop is an always-inline body compiled twice: for the baseline
// x86-64 target (SSE2) and, chosen at run time, for AVX2 (twice the vector
// width; OpenBLAS's own kernels use it too). No FMA is enabled, and the
// partial sums are spelled out in the source, so both builds of a loop give
// the same bits.
#define DDPX_INLINE inline __attribute__((always_inline))
#define DDPX_AVX2 __attribute__((target("avx2")))

std::atomic<bool> portable_for_testing{false};

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && !portable_for_testing.load(std::memory_order_relaxed);
}

// Partial sums per dot product: 8 independent lanes the compiler keeps in
// vector registers (a single running sum would serialize on its latency and
// cannot be vectorized without reassociating, which -O2 does not do).
constexpr int64_t kLanes = 8;

// Q^T (rank x cols) from Q (cols x rank), so that the loops over a row of M
// read each factor column contiguously.
std::vector<float> transposed(const float* q, int64_t cols, int64_t rank) {
  std::vector<float> qt(static_cast<size_t>(rank * cols));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < rank; ++k) qt[k * cols + j] = q[j * rank + k];
  return qt;
}

// The end of a row's products: columns from `j` on (fewer than kLanes,
// with the input added as in the vector part) and p[k] as the fixed sum of
// the partial sums `acc[k]` and that tail. Shared by both paths, so their
// bits agree.
template <int R, bool kAdd>
DDPX_INLINE void finish_row(float* __restrict row, const float* __restrict input,
                            const float* __restrict qt, int64_t j, int64_t cols,
                            const float (*acc)[kLanes], float* __restrict p) {
  float tail[R] = {};
  for (; j < cols; ++j) {
    const float v = kAdd ? row[j] + input[j] : row[j];
    if (kAdd) row[j] = v;
    for (int r = 0; r < R; ++r) tail[r] += v * qt[r * cols + j];
  }
  for (int r = 0; r < R; ++r) {
    const float* a = acc[r];
    p[r] = (((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))) + tail[r];
  }
}

// p[k] = dot(row, qt[k]) for k < R, optionally after row += input (stored
// back). One sweep over the row: each element is loaded (and, with the
// input, stored) once for all R products.
template <int R, bool kAdd>
DDPX_INLINE void row_products(float* __restrict row, const float* __restrict input,
                  const float* __restrict qt, int64_t cols, float* __restrict p) {
  float acc[R][kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes) {
    float v[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) {
      v[l] = kAdd ? row[j + l] + input[j + l] : row[j + l];
      if (kAdd) row[j + l] = v[l];
    }
    for (int r = 0; r < R; ++r)
      for (int64_t l = 0; l < kLanes; ++l) acc[r][l] += v[l] * qt[r * cols + j + l];
  }
  finish_row<R, kAdd>(row, input, qt, j, cols, acc, p);
}

template <int R, bool kAdd>
DDPX_INLINE void streaming_m_q_body(float* m, const float* input, int64_t rows,
                                    int64_t cols, const float* qt, float* p) {
  for (int64_t i = 0; i < rows; ++i) {
    row_products<R, kAdd>(m + i * cols, kAdd ? input + i * cols : nullptr, qt, cols,
                          p + i * R);
  }
}
template <int R, bool kAdd>
void streaming_m_q_portable(float* m, const float* input, int64_t rows, int64_t cols,
                            const float* qt, float* p) {
  streaming_m_q_body<R, kAdd>(m, input, rows, cols, qt, p);
}
// The AVX2 build of streaming_m_q_body written with intrinsics: GCC keeps
// row_products' accumulator array on the stack (a store-to-load round trip
// per addition: P = M Q ran at a seventh of memory speed at rank 2). Lane l
// of accumulator r is acc[r][l] of the portable loop and the additions come
// in the same order, so both paths give the same bits. kRows rows per
// sweep share the loads of Q^T; with the input to add, one row at a time
// streams faster (three streams per row already: input, M, M's store).
template <int R, bool kAdd, int kRows>
DDPX_AVX2 void streaming_m_q_avx2(float* m, const float* input, int64_t rows,
                                  int64_t cols, const float* qt, float* p) {
  static_assert(kLanes == 8, "one __m256 per accumulator");
  int64_t i = 0;
  for (; i + kRows <= rows; i += kRows) {
    float* row[kRows];
    const float* in[kRows];
    // Loops over rows and r fully unrolled: GCC -O2 otherwise keeps the
    // accumulators on the stack again.
    __m256 acc[kRows][R];
#pragma GCC unroll 2
    for (int x = 0; x < kRows; ++x) {
      row[x] = m + (i + x) * cols;
      in[x] = kAdd ? input + (i + x) * cols : nullptr;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[x][r] = _mm256_setzero_ps();
    }
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      __m256 v[kRows];
#pragma GCC unroll 2
      for (int x = 0; x < kRows; ++x) {
        v[x] = _mm256_loadu_ps(row[x] + j);
        if (kAdd) {
          v[x] = _mm256_add_ps(v[x], _mm256_loadu_ps(in[x] + j));
          _mm256_storeu_ps(row[x] + j, v[x]);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 q = _mm256_loadu_ps(qt + r * cols + j);
#pragma GCC unroll 2
        for (int x = 0; x < kRows; ++x) {
          acc[x][r] = _mm256_add_ps(acc[x][r], _mm256_mul_ps(v[x], q));
        }
      }
    }
    for (int x = 0; x < kRows; ++x) {
      float partial[R][kLanes];
      for (int r = 0; r < R; ++r) _mm256_storeu_ps(partial[r], acc[x][r]);
      finish_row<R, kAdd>(row[x], in[x], qt, j, cols, partial, p + (i + x) * R);
    }
  }
  for (; i < rows; ++i) {
    row_products<R, kAdd>(m + i * cols, kAdd ? input + i * cols : nullptr, qt, cols,
                          p + i * R);
  }
}

template <int R, bool kAdd>
void streaming_m_q(float* m, const float* input, int64_t rows, int64_t cols,
                   const float* q, float* p) {
  const std::vector<float> qt = transposed(q, cols, R);
  if (cpu_has_avx2()) {
    streaming_m_q_avx2<R, kAdd, kAdd ? 1 : 2>(m, input, rows, cols, qt.data(), p);
  } else {
    streaming_m_q_portable<R, kAdd>(m, input, rows, cols, qt.data(), p);
  }
}

template <bool kAdd>
void dispatch_m_q(float* m, const float* input, int64_t rows, int64_t cols,
                  const float* q, int64_t rank, float* p) {
  switch (rank) {
    case 1: return streaming_m_q<1, kAdd>(m, input, rows, cols, q, p);
    case 2: return streaming_m_q<2, kAdd>(m, input, rows, cols, q, p);
    case 3: return streaming_m_q<3, kAdd>(m, input, rows, cols, q, p);
    case 4: return streaming_m_q<4, kAdd>(m, input, rows, cols, q, p);
  }
  // Large ranks are compute-bound: OpenBLAS's blocking pays off there.
  if (kAdd) add_inplace(m, input, rows * cols);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, rank, cols, 1.0f,
              m, cols, q, rank, 0.0f, p, rank);
}

// Q^T (R x cols) accumulated row by row of M: qt[k] += p[i][k] * M[i] (an
// axpy per row and rank, reading the row once from memory, then from L1).
template <int R>
DDPX_INLINE void streaming_mt_p_body(const float* m, int64_t rows, int64_t cols,
                                     const float* p, float* qt) {
  // Four rows per sweep over the accumulators: a quarter of the loads and
  // stores of Q^T, with the additions still in row order (bit for bit the
  // row-at-a-time loop below).
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float* __restrict r0 = m + i * cols;
    const float* __restrict r1 = r0 + cols;
    const float* __restrict r2 = r1 + cols;
    const float* __restrict r3 = r2 + cols;
    for (int r = 0; r < R; ++r) {
      const float p0 = p[i * R + r], p1 = p[(i + 1) * R + r];
      const float p2 = p[(i + 2) * R + r], p3 = p[(i + 3) * R + r];
      float* __restrict acc = qt + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        acc[j] = (((acc[j] + p0 * r0[j]) + p1 * r1[j]) + p2 * r2[j]) + p3 * r3[j];
      }
    }
  }
  for (; i < rows; ++i) {
    const float* __restrict row = m + i * cols;
    for (int r = 0; r < R; ++r) {
      const float pr = p[i * R + r];
      float* __restrict acc = qt + r * cols;
      for (int64_t j = 0; j < cols; ++j) acc[j] += pr * row[j];
    }
  }
}
template <int R>
void streaming_mt_p_portable(const float* m, int64_t rows, int64_t cols, const float* p,
                             float* qt) {
  streaming_mt_p_body<R>(m, rows, cols, p, qt);
}
template <int R>
DDPX_AVX2 void streaming_mt_p_avx2(const float* m, int64_t rows, int64_t cols,
                                   const float* p, float* qt) {
  streaming_mt_p_body<R>(m, rows, cols, p, qt);
}

template <int R>
void streaming_mt_p(const float* m, int64_t rows, int64_t cols, const float* p,
                    float* q) {
  std::vector<float> qt(static_cast<size_t>(R * cols), 0.0f);
  if (cpu_has_avx2()) {
    streaming_mt_p_avx2<R>(m, rows, cols, p, qt.data());
  } else {
    streaming_mt_p_portable<R>(m, rows, cols, p, qt.data());
  }
  for (int64_t j = 0; j < cols; ++j)
    for (int r = 0; r < R; ++r) q[j * R + r] = qt[r * cols + j];
}

}  // namespace

void matmul_m_q(const float* m, int64_t rows, int64_t cols, const float* q,
                int64_t rank, float* p) {
  // Rank 1 without an addition to fuse: OpenBLAS's sgemv (AVX2/FMA
  // kernels) already streams M at memory speed.
  if (rank == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, m, cols, q, 1, 0.0f, p, 1);
    return;
  }
  // Read-only without an input: the const_cast never leads to a store.
  dispatch_m_q<false>(const_cast<float*>(m), nullptr, rows, cols, q, rank, p);
}

void add_then_matmul_m_q(float* m, const float* input, int64_t rows, int64_t cols,
                         const float* q, int64_t rank, float* p) {
  dispatch_m_q<true>(m, input, rows, cols, q, rank, p);
}

void matmul_mt_p(const float* m, int64_t rows, int64_t cols, const float* p,
                 int64_t rank, float* q) {
  switch (rank) {
    case 1:  // as in matmul_m_q
      cblas_sgemv(CblasRowMajor, CblasTrans, rows, cols, 1.0f, m, cols, p, 1, 0.0f, q, 1);
      return;
    case 2: return streaming_mt_p<2>(m, rows, cols, p, q);
    case 3: return streaming_mt_p<3>(m, rows, cols, p, q);
    case 4: return streaming_mt_p<4>(m, rows, cols, p, q);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, rank, rows, 1.0f,
              m, cols, p, rank, 0.0f, q, rank);
}

void matmul_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                 int64_t rank, float* m) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, rank, 1.0f,
              p, rank, q, rank, 0.0f, m, cols);
}

namespace {

DDPX_INLINE void decompress_body(const float* p, const float* qt, int64_t rows,
                                 int64_t cols, int64_t rank, float* out, float* e) {
  for (int64_t i = 0; i < rows; ++i) {
    // restrict: the row, its error and Q^T never overlap, which lets the
    // compiler keep the loops vectorized.
    float* __restrict o = out + i * cols;
    const float* __restrict q0 = qt;
    const float* pi = p + i * rank;
    const float p0 = pi[0];
    for (int64_t j = 0; j < cols; ++j) o[j] = p0 * q0[j];
    for (int64_t k = 1; k < rank; ++k) {
      const float pk = pi[k];
      const float* __restrict qk = qt + k * cols;
      for (int64_t j = 0; j < cols; ++j) o[j] += pk * qk[j];
    }
    if (e != nullptr) {
      float* __restrict ei = e + i * cols;
      for (int64_t j = 0; j < cols; ++j) ei[j] -= o[j];
    }
  }
}
void decompress_portable(const float* p, const float* qt, int64_t rows, int64_t cols,
                         int64_t rank, float* out, float* e) {
  decompress_body(p, qt, rows, cols, rank, out, e);
}
// M ~ P Q^T (and e -= it) for one row of the AVX2 path, columns [j, cols)
// after the vector part.
template <int R>
DDPX_AVX2 DDPX_INLINE void decompress_row_tail(const float* pi, const float* qt, int64_t j,
                                               int64_t cols, float* __restrict o,
                                               float* __restrict ei) {
  for (; j < cols; ++j) {
    float v = pi[0] * qt[j];
    for (int k = 1; k < R; ++k) v += pi[k] * qt[k * cols + j];
    o[j] = v;
    if (ei != nullptr) ei[j] -= v;
  }
}

// decompress_body for ranks 3-4 with intrinsics, two rows per sweep (they
// share each load of Q^T, which at rank 4 is larger than L1; 1.3x faster
// on ResNet-50's matrices): each element
// gets the same operations in the same order ((p0 q0 + p1 q1) + ..., then
// e - o), so the bits equal the portable loops'.
template <int R>
DDPX_AVX2 void decompress_rank_avx2(const float* p, const float* qt, int64_t rows,
                                    int64_t cols, float* out, float* e) {
  int64_t i = 0;
  for (; i + 2 <= rows; i += 2) {
    float* __restrict o0 = out + i * cols;
    float* __restrict o1 = o0 + cols;
    float* __restrict e0 = e != nullptr ? e + i * cols : nullptr;
    float* __restrict e1 = e != nullptr ? e0 + cols : nullptr;
    const float* p0 = p + i * R;
    const float* p1 = p0 + R;
    __m256 a[R], b[R];
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) {
      a[k] = _mm256_set1_ps(p0[k]);
      b[k] = _mm256_set1_ps(p1[k]);
    }
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 q = _mm256_loadu_ps(qt + j);
      __m256 v = _mm256_mul_ps(a[0], q), w = _mm256_mul_ps(b[0], q);
#pragma GCC unroll 4
      for (int k = 1; k < R; ++k) {
        q = _mm256_loadu_ps(qt + k * cols + j);
        v = _mm256_add_ps(v, _mm256_mul_ps(a[k], q));
        w = _mm256_add_ps(w, _mm256_mul_ps(b[k], q));
      }
      _mm256_storeu_ps(o0 + j, v);
      _mm256_storeu_ps(o1 + j, w);
      if (e != nullptr) {
        _mm256_storeu_ps(e0 + j, _mm256_sub_ps(_mm256_loadu_ps(e0 + j), v));
        _mm256_storeu_ps(e1 + j, _mm256_sub_ps(_mm256_loadu_ps(e1 + j), w));
      }
    }
    decompress_row_tail<R>(p0, qt, j, cols, o0, e0);
    decompress_row_tail<R>(p1, qt, j, cols, o1, e1);
  }
  for (; i < rows; ++i) {
    decompress_row_tail<R>(p + i * R, qt, 0, cols, out + i * cols,
                           e != nullptr ? e + i * cols : nullptr);
  }
}

DDPX_AVX2 void decompress_avx2(const float* p, const float* qt, int64_t rows,
                               int64_t cols, int64_t rank, float* out, float* e) {
  switch (rank) {
    // Ranks 1-2: Q^T fits in L1 and the plain loops already run at memory
    // speed (measured on ResNet-50's matrices; two rows per sweep were no
    // faster there).
    case 3: return decompress_rank_avx2<3>(p, qt, rows, cols, out, e);
    case 4: return decompress_rank_avx2<4>(p, qt, rows, cols, out, e);
  }
  decompress_body(p, qt, rows, cols, rank, out, e);
}

}  // namespace

void decompress_p_qt(const float* p, const float* q, int64_t rows, int64_t cols,
                     int64_t rank, float* out, float* e) {
  // Q^T (rank x cols) so the inner loops run over contiguous columns.
  const std::vector<float> qt = transposed(q, cols, rank);
  if (cpu_has_avx2()) {
    decompress_avx2(p, qt.data(), rows, cols, rank, out, e);
  } else {
    decompress_portable(p, qt.data(), rows, cols, rank, out, e);
  }
}

void use_portable_powersgd_kernels_for_testing(bool portable) {
  portable_for_testing.store(portable, std::memory_order_relaxed);
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
