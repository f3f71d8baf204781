// The Gram-Schmidt kernel's steps replayed on the CPU for a 256-thread
// block, against the CPU PowerSGD hook's orthogonalize_columns.
#include <cmath>
#include <random>
#include <vector>

#include "cuda/launch_math.h"
#include "cuda/orthogonalize_math.h"
#include "gtest/gtest.h"
#include "hooks/powersgd_orthogonalize.h"

namespace ddpx {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> m(rows * cols);
  for (float& x : m) x = normal(rng);
  return m;
}

double column_dot(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t a,
                  int64_t b) {
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) s += static_cast<double>(m[r * cols + a]) * m[r * cols + b];
  return s;
}

TEST(OrthogonalizeMath, BlockReplayMatchesTheCpuHookToFloatRounding) {
  struct Shape {
    int64_t rows, cols;
  };
  for (Shape s : {Shape{1, 1}, Shape{7, 2}, Shape{300, 1}, Shape{1000, 4}, Shape{4096, 8}}) {
    for (float eps : {0.0f, 1e-8f}) {
      std::vector<float> gpu = random_matrix(s.rows, s.cols, 3);
      std::vector<float> cpu = gpu;
      int zeros_gpu = cuda_math::orthogonalize_block_replay(gpu.data(), s.rows, s.cols, eps,
                                                            cuda_math::kThreadsPerBlock);
      int zeros_cpu = orthogonalize_columns(cpu.data(), s.rows, s.cols, eps);
      EXPECT_EQ(zeros_gpu, zeros_cpu);
      for (size_t i = 0; i < gpu.size(); ++i) {
        // Only the order of the double sums differs: agree to a few ulps.
        ASSERT_NEAR(gpu[i], cpu[i], 4e-6f * std::max(1.0f, std::fabs(cpu[i])))
            << "element " << i << " of " << s.rows << "x" << s.cols << " eps " << eps;
      }
      for (int64_t a = 0; a < s.cols; ++a) {
        EXPECT_NEAR(column_dot(gpu, s.rows, s.cols, a, a), 1.0, 1e-4);
        for (int64_t b = a + 1; b < s.cols; ++b)
          EXPECT_NEAR(column_dot(gpu, s.rows, s.cols, a, b), 0.0, 1e-4);
      }
    }
  }
}

TEST(OrthogonalizeMath, ZeroColumnWithoutEpsilonBecomesZerosNotNaN) {
  const int64_t rows = 50, cols = 3;
  std::vector<float> m = random_matrix(rows, cols, 9);
  for (int64_t r = 0; r < rows; ++r) m[r * cols + 1] = 0.0f;
  std::vector<float> cpu = m;
  EXPECT_EQ(cuda_math::orthogonalize_block_replay(m.data(), rows, cols, 0.0f, 256), 1);
  EXPECT_EQ(orthogonalize_columns(cpu.data(), rows, cols, 0.0f), 1);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(m[r * cols + 1], 0.0f);
    EXPECT_FALSE(std::isnan(m[r * cols + 2]));
  }
}

TEST(OrthogonalizeMath, ThreadCountDoesNotChangeTheResultBeyondRounding) {
  const int64_t rows = 513, cols = 4;
  std::vector<float> a = random_matrix(rows, cols, 21), b = a;
  cuda_math::orthogonalize_block_replay(a.data(), rows, cols, 0.0f, 1);
  cuda_math::orthogonalize_block_replay(b.data(), rows, cols, 0.0f, 256);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 4e-6f);
}

}  // namespace
}  // namespace ddpx
