// The column-major arguments gemm_layout.h computes for cuBLAS, handed to
// OpenBLAS's column-major sgemm (same BLAS semantics as cublasSgemm), must
// reproduce the CPU PowerSGD hook's row-major products.
#include <cblas.h>

#include <random>
#include <vector>

#include "cuda/gemm_layout.h"
#include "gtest/gtest.h"
#include "hooks/powersgd_kernels.h"

namespace ddpx {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// C = op(A) op(B), row-major, through the column-major call: what
// cublas_gemm.cc does with cublasSgemm.
std::vector<float> column_major_call(const cuda_math::ColumnMajorGemm& g, const float* a,
                                     const float* b) {
  std::vector<float> c(g.m * g.n, -7.0f);  // beta = 0 must overwrite
  cblas_sgemm(CblasColMajor, g.transpose_first ? CblasTrans : CblasNoTrans,
              g.transpose_second ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, b,
              g.ld_first, a, g.ld_second, 0.0f, c.data(), g.ld_c);
  return c;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
}

TEST(GemmLayout, PowerSgdProductsMatchTheCpuHook) {
  const int64_t rows = 37, cols = 53, rank = 4;
  const cuda_math::PowerSgdShapes shapes{rows, cols, rank};
  std::vector<float> m = random_values(rows * cols, 1);
  std::vector<float> q = random_values(cols * rank, 2);
  std::vector<float> p = random_values(rows * rank, 3);

  std::vector<float> p_cpu(rows * rank);
  matmul_m_q(m.data(), rows, cols, q.data(), rank, p_cpu.data());
  expect_close(column_major_call(shapes.p_from_q(), m.data(), q.data()), p_cpu);

  std::vector<float> q_cpu(cols * rank);
  matmul_mt_p(m.data(), rows, cols, p.data(), rank, q_cpu.data());
  expect_close(column_major_call(shapes.q_from_p(), m.data(), p.data()), q_cpu);

  std::vector<float> m_cpu(rows * cols);
  matmul_p_qt(p.data(), q.data(), rows, cols, rank, m_cpu.data());
  expect_close(column_major_call(shapes.approximation(), p.data(), q.data()), m_cpu);
}

TEST(GemmLayout, EveryTransposeCombinationAgainstANaiveProduct) {
  const int64_t m = 5, n = 3, k = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a = random_values(m * k, 10), b = random_values(k * n, 11);
      std::vector<float> want(m * n, 0.0f);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t l = 0; l < k; ++l) {
            float av = ta ? a[l * m + i] : a[i * k + l];
            float bv = tb ? b[j * k + l] : b[l * n + j];
            want[i * n + j] += av * bv;
          }
      expect_close(column_major_call(cuda_math::row_major_gemm(ta, tb, m, n, k), a.data(),
                                     b.data()),
                   want);
    }
  }
}

}  // namespace
}  // namespace ddpx
