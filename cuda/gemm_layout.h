// Row-major GEMMs expressed as the column-major calls cuBLAS (and any BLAS)
// understands. A row-major matrix is the column-major transpose of itself, so
// C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T in column-major: the
// operands swap places and the dimensions follow. Plain C++, tested on the
// CPU against OpenBLAS's column-major sgemm (tests/cuda/gemm_layout_test.cc).
#ifndef DDPX_CUDA_GEMM_LAYOUT_H_
#define DDPX_CUDA_GEMM_LAYOUT_H_

#include <cstdint>

namespace ddpx {
namespace cuda_math {

// A column-major call C = op(first) op(second), C being m x n.
struct ColumnMajorGemm {
  bool transpose_first;
  bool transpose_second;
  int64_t m, n, k;
  int64_t ld_first, ld_second, ld_c;
};

// Row-major C (m x n) = op(A) op(B) with op(A) m x k and op(B) k x n; A is
// stored m x k (k x m when transpose_a), B k x n (n x k when transpose_b).
// The result's first operand is B, its second A.
inline ColumnMajorGemm row_major_gemm(bool transpose_a, bool transpose_b, int64_t m,
                                      int64_t n, int64_t k) {
  ColumnMajorGemm g;
  g.transpose_first = transpose_b;
  g.transpose_second = transpose_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.ld_first = transpose_b ? k : n;   // B's row length
  g.ld_second = transpose_a ? m : k;  // A's row length
  g.ld_c = n;
  return g;
}

// PowerSGD's three products for a row-major rows x cols gradient M and
// rank r: P = M Q (rows x r), Q = M^T P (cols x r), M ~ P Q^T (rows x cols).
struct PowerSgdShapes {
  int64_t rows, cols, rank;
  ColumnMajorGemm p_from_q() const { return row_major_gemm(false, false, rows, rank, cols); }
  ColumnMajorGemm q_from_p() const { return row_major_gemm(true, false, cols, rank, rows); }
  ColumnMajorGemm approximation() const { return row_major_gemm(false, true, rows, cols, rank); }
};

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_GEMM_LAYOUT_H_
