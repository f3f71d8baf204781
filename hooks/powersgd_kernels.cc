#include "hooks/powersgd_kernels.h"

#include <cblas.h>

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

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
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
template <int R, bool kAdd>
DDPX_AVX2 void streaming_m_q_avx2(float* m, const float* input, int64_t rows,
                                  int64_t cols, const float* qt, float* p) {
  streaming_m_q_body<R, kAdd>(m, input, rows, cols, qt, p);
}

template <int R, bool kAdd>
void streaming_m_q(float* m, const float* input, int64_t rows, int64_t cols,
                   const float* q, float* p) {
  const std::vector<float> qt = transposed(q, cols, R);
  if (cpu_has_avx2()) {
    streaming_m_q_avx2<R, kAdd>(m, input, rows, cols, qt.data(), p);
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
DDPX_AVX2 void decompress_avx2(const float* p, const float* qt, int64_t rows,
                               int64_t cols, int64_t rank, float* out, float* e) {
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
