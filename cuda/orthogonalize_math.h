// PowerSGD's Gram-Schmidt orthogonalization split into the steps one CUDA
// block runs on one row-major rows x cols matrix: thread t of T owns rows
// t, t + T, ...; column sums are per-thread partials (double, as the CPU
// hooks accumulate) combined in block_reduce.h's tree order.
//
// The arithmetic is hooks/powersgd_orthogonalize.cc's: for column i,
//   norm = float(sqrt(sum of squares)); column /= (norm + eps), or becomes
//   zeros when eps == 0 and norm == 0; then for every later column j,
//   d = float(dot(col i, col j)); col j -= d * col i (rounded separately).
// Only the order of the double-precision sums differs from the CPU, so the
// results agree to float rounding (tests/cuda/orthogonalize_math_test.cc).
#ifndef DDPX_CUDA_ORTHOGONALIZE_MATH_H_
#define DDPX_CUDA_ORTHOGONALIZE_MATH_H_

#include <math.h>
#include <stdint.h>

#include <vector>

#include "cuda/block_reduce.h"
#include "cuda/float_ops.h"

namespace ddpx {
namespace cuda_math {

DDPX_HOST_DEVICE inline double gs_partial_dot(const float* m, int64_t rows, int64_t cols,
                                              int64_t a, int64_t b, int64_t thread,
                                              int64_t nthreads) {
  double acc = 0.0;
  for (int64_t r = thread; r < rows; r += nthreads) {
    acc = dadd_rn(acc, dmul_rn(static_cast<double>(m[r * cols + a]),
                               static_cast<double>(m[r * cols + b])));
  }
  return acc;
}

// The divisor of column i, or 0 when the column must become zeros.
DDPX_HOST_DEVICE inline float gs_denominator(double sum_sq, float epsilon) {
  float norm = static_cast<float>(sqrt(sum_sq));
  if (epsilon == 0.0f && norm == 0.0f) return 0.0f;
  return add_rn(norm, epsilon);
}

DDPX_HOST_DEVICE inline void gs_normalize_rows(float* m, int64_t rows, int64_t cols,
                                               int64_t i, float denominator,
                                               int64_t thread, int64_t nthreads) {
  for (int64_t r = thread; r < rows; r += nthreads) {
    float& v = m[r * cols + i];
    v = denominator == 0.0f ? 0.0f : div_rn(v, denominator);
  }
}

DDPX_HOST_DEVICE inline void gs_project_rows(float* m, int64_t rows, int64_t cols,
                                             int64_t i, int64_t j, float dot,
                                             int64_t thread, int64_t nthreads) {
  for (int64_t r = thread; r < rows; r += nthreads)
    m[r * cols + j] = sub_rn(m[r * cols + j], mul_rn(dot, m[r * cols + i]));
}

struct AddDouble {
  DDPX_HOST_DEVICE double operator()(double a, double b) const { return dadd_rn(a, b); }
};

// The CUDA kernel's exact sequence of steps, replayed on the host for a block
// of `nthreads` (a power of two) threads. Returns the number of columns that
// became zeros.
inline int orthogonalize_block_replay(float* m, int64_t rows, int64_t cols, float epsilon,
                                      int nthreads) {
  std::vector<double> partial(nthreads);
  auto block_sum = [&](int64_t a, int64_t b) {
    for (int t = 0; t < nthreads; ++t) partial[t] = gs_partial_dot(m, rows, cols, a, b, t, nthreads);
    reduce_in_tree_order(partial.data(), nthreads, AddDouble());
    return partial[0];
  };
  int zero_columns = 0;
  for (int64_t i = 0; i < cols; ++i) {
    float denom = gs_denominator(block_sum(i, i), epsilon);
    if (denom == 0.0f) ++zero_columns;
    for (int t = 0; t < nthreads; ++t) gs_normalize_rows(m, rows, cols, i, denom, t, nthreads);
    for (int64_t j = i + 1; j < cols; ++j) {
      float dot = static_cast<float>(block_sum(i, j));
      for (int t = 0; t < nthreads; ++t) gs_project_rows(m, rows, cols, i, j, dot, t, nthreads);
    }
  }
  return zero_columns;
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_ORTHOGONALIZE_MATH_H_
