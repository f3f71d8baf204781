// PowerSGD's arithmetic without a process group: orthogonalization, the
// compress-or-not rule, the plans, the random stream, option parsing.
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/powersgd_hook.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_orthogonalize.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_random.h"
#include "hooks/powersgd_state.h"

namespace ddpx {
namespace {

double column_dot(const std::vector<float>& m, int64_t rows, int64_t cols,
                  int64_t a, int64_t b) {
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) s += double(m[r * cols + a]) * m[r * cols + b];
  return s;
}

TEST(Orthogonalize, ColumnsBecomeOrthonormalAndSpanIsKept) {
  const int64_t rows = 50, cols = 4;
  std::vector<float> m(rows * cols);
  fill_standard_normal(m.data(), m.size(), 7);
  const std::vector<float> original = m;
  ASSERT_EQ(orthogonalize_columns(m.data(), rows, cols, 0.0f), 0);
  for (int64_t a = 0; a < cols; ++a) {
    for (int64_t b = 0; b < cols; ++b) {
      EXPECT_NEAR(column_dot(m, rows, cols, a, b), a == b ? 1.0 : 0.0, 1e-5)
          << "columns " << a << ", " << b;
    }
  }
  // Gram-Schmidt keeps the first column's direction and, for each k, the
  // span of the first k columns: original column k has no component outside
  // the new columns 0..k.
  for (int64_t k = 0; k < cols; ++k) {
    std::vector<double> residual(rows);
    for (int64_t r = 0; r < rows; ++r) residual[r] = original[r * cols + k];
    for (int64_t j = 0; j <= k; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) dot += residual[r] * m[r * cols + j];
      for (int64_t r = 0; r < rows; ++r) residual[r] -= dot * m[r * cols + j];
    }
    double norm = 0;
    for (double v : residual) norm += v * v;
    EXPECT_LT(std::sqrt(norm), 1e-4) << "column " << k;
  }
  const double scale = original[0] / m[0];
  EXPECT_GT(scale, 0);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(original[r * cols] / scale, m[r * cols], 1e-5);
}

TEST(Orthogonalize, EpsilonIsAddedToTheNorm) {
  std::vector<float> column = {3.0f, 4.0f};
  orthogonalize_columns(column.data(), 2, 1, 1.0f);
  EXPECT_FLOAT_EQ(column[0], 3.0f / 6.0f);
  EXPECT_FLOAT_EQ(column[1], 4.0f / 6.0f);
}

TEST(Orthogonalize, ZeroColumnBecomesZerosNotNaN) {
  std::vector<float> m = {1, 0, 0, 0, 0, 0};  // 3 x 2, second column zero
  EXPECT_EQ(orthogonalize_columns(m.data(), 3, 2, 0.0f), 1);
  for (float v : m) EXPECT_FALSE(std::isnan(v));
  EXPECT_EQ(m[0], 1.0f);
  EXPECT_EQ(m[1], 0.0f);
  // With epsilon the zero column stays zero and nothing is reported.
  std::vector<float> z = {0, 0, 0};
  EXPECT_EQ(orthogonalize_columns(z.data(), 3, 1, 1e-8f), 0);
  for (float v : z) EXPECT_EQ(v, 0.0f);
}

TEST(ShouldCompress, IsTorchsInequality) {
  // (rows + cols) * rank * rate < rows * cols.
  EXPECT_TRUE(should_compress(12, 8, 2, 2.0));    // 80 < 96
  EXPECT_FALSE(should_compress(10, 10, 2, 2.5));  // 100 < 100 is false
  EXPECT_TRUE(should_compress(10, 10, 2, 2.49));
  EXPECT_FALSE(should_compress(4, 6, 2, 2.0));    // 40 < 24 is false
  EXPECT_TRUE(should_compress(4, 6, 2, 0.5));     // 10 < 24
  EXPECT_FALSE(should_compress(1000, 1000, 500, 1.0));
}

TEST(PlanLayerwise, SplitsCompressedAndUncompressedAndGroupsByShape) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  // (12,8) yes; (7,) vector no; (10,8) yes; (4,3,2)->(4,6) no; (12,8) yes;
  // scalar no; (3,100) -> rank 2: 206 * 2 * 2 = 824 < 300 no.
  std::vector<Shape> shapes = {{12, 8}, {7}, {10, 8}, {4, 3, 2}, {12, 8}, {}, {3, 100}};
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Shape& s : shapes) {
    offsets.push_back(at);
    at += shape_numel(s);
  }
  auto plan = plan_layerwise(offsets, shapes, at, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matrices.size(), 3u);
  // Both (12,8) first (first shape seen), then (10,8).
  EXPECT_EQ(plan->matrices[0].offset, offsets[0]);
  EXPECT_EQ(plan->matrices[1].offset, offsets[4]);
  EXPECT_EQ(plan->matrices[2].offset, offsets[2]);
  EXPECT_EQ(plan->matrices[1].p_offset, 12 * 2);
  EXPECT_EQ(plan->matrices[2].p_offset, 2 * 12 * 2);
  EXPECT_EQ(plan->matrices[2].q_offset, 2 * 8 * 2);
  EXPECT_EQ(plan->p_numel, (12 + 12 + 10) * 2);
  EXPECT_EQ(plan->q_numel, (8 + 8 + 8) * 2);
  ASSERT_EQ(plan->uncompressed.size(), 4u);
  EXPECT_EQ(plan->uncompressed[0], std::make_pair(offsets[1], int64_t{7}));
  EXPECT_EQ(plan->uncompressed[1], std::make_pair(offsets[3], int64_t{24}));
  EXPECT_EQ(plan->uncompressed[2], std::make_pair(offsets[5], int64_t{1}));
  EXPECT_EQ(plan->uncompressed[3], std::make_pair(offsets[6], int64_t{300}));
  EXPECT_EQ(plan->uncompressed_numel, 7 + 24 + 1 + 300);
  EXPECT_EQ(plan->numel_before, at);
  EXPECT_EQ(plan->numel_after, (20 + 18 + 20) * 2 + 7 + 24 + 1 + 300);
}

TEST(PlanLayerwise, RankIsCappedByTheMatrixAndVectorsNeverCompress) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 8;
  o.min_compression_rate = 0.1;  // torch would compress a vector at this rate
  auto plan = plan_layerwise({0, 2 * 50, 2 * 50 + 100}, {{2, 50}, {100}, {60, 3}},
                             2 * 50 + 100 + 180, o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->matrices.size(), 2u);
  EXPECT_EQ(plan->matrices[0].rank, 2);
  EXPECT_EQ(plan->matrices[1].rank, 3);
  ASSERT_EQ(plan->uncompressed.size(), 1u);
  EXPECT_EQ(plan->uncompressed[0].second, 100);
}

TEST(PlanLayerwise, RejectsGradientsOutsideTheBucket) {
  PowerSGDOptions o;
  auto plan = plan_layerwise({0, 10}, {{2, 5}, {3, 4}}, 20, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("outside the bucket"), std::string::npos);
  EXPECT_FALSE(plan_layerwise({0}, {{2, 5}, {3}}, 20, o).ok());
}

TEST(PlanSquare, PadsToTheSmallestSquare) {
  EXPECT_EQ(square_side(0), 0);
  EXPECT_EQ(square_side(1), 1);
  EXPECT_EQ(square_side(30), 6);
  EXPECT_EQ(square_side(36), 6);
  EXPECT_EQ(square_side(37), 7);
  EXPECT_EQ(square_side(25557032), 5056);  // ResNet-50's parameter count
  EXPECT_EQ(square_side(int64_t{4611686014132420609}), 2147483647);
  PowerSGDOptions o;
  o.matrix_approximation_rank = 3;
  CompressionPlan p = plan_square(3, o);  // side 2 < rank 3
  ASSERT_EQ(p.matrices.size(), 1u);
  EXPECT_EQ(p.matrices[0].rows, 2);
  EXPECT_EQ(p.matrices[0].rank, 2);
  EXPECT_TRUE(p.uncompressed.empty());
}

TEST(Random, SameSeedSameStreamAndStandardNormal) {
  std::vector<float> a(100001), b(100001);
  fill_standard_normal(a.data(), a.size(), 42);
  fill_standard_normal(b.data(), b.size(), 42);
  EXPECT_EQ(a, b);
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= a.size();
  for (float v : a) var += (v - mean) * (v - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
  fill_standard_normal(b.data(), b.size(), 43);
  EXPECT_NE(a, b);
  SplitMix64 g1(5), g2(5);
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = g1.next();
    EXPECT_EQ(x, g2.next());
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Kernels, ProductsMatchNaiveLoops) {
  const int64_t rows = 7, cols = 5, rank = 3;
  std::vector<float> m(rows * cols), q(cols * rank), p(rows * rank), q2(cols * rank),
      out(rows * cols);
  fill_standard_normal(m.data(), m.size(), 1);
  fill_standard_normal(q.data(), q.size(), 2);
  matmul_m_q(m.data(), rows, cols, q.data(), rank, p.data());
  matmul_mt_p(m.data(), rows, cols, p.data(), rank, q2.data());
  matmul_p_qt(p.data(), q2.data(), rows, cols, rank, out.data());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < rank; ++k) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += double(m[i * cols + j]) * q[j * rank + k];
      EXPECT_NEAR(p[i * rank + k], s, 1e-5);
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t k = 0; k < rank; ++k) {
      double s = 0;
      for (int64_t i = 0; i < rows; ++i) s += double(m[i * cols + j]) * p[i * rank + k];
      EXPECT_NEAR(q2[j * rank + k], s, 1e-4);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < rank; ++k) s += double(p[i * rank + k]) * q2[j * rank + k];
      EXPECT_NEAR(out[i * cols + j], s, 1e-3 * (1 + std::fabs(s)));
    }
  }
}

// Every dispatch of the products (rank 1: sgemv; 2..4: the streaming loops
// with their 8-lane partial sums, tails and 4-row blocks; 5: sgemm) against
// double-precision loops, on shapes with remainders everywhere.
TEST(Kernels, StreamingProductsMatchNaiveLoopsAtEveryRank) {
  for (int64_t rank = 1; rank <= kStreamingMaxRank + 1; ++rank) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 37}, {13, 8}, {4, 3}, {1, 101}}) {
      std::vector<float> m(rows * cols), q(cols * rank), p(rows * rank), q2(cols * rank);
      fill_standard_normal(m.data(), m.size(), 10 + rank);
      fill_standard_normal(q.data(), q.size(), 20 + rank);
      matmul_m_q(m.data(), rows, cols, q.data(), rank, p.data());
      matmul_mt_p(m.data(), rows, cols, p.data(), rank, q2.data());
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t k = 0; k < rank; ++k) {
          double s = 0;
          for (int64_t j = 0; j < cols; ++j) s += double(m[i * cols + j]) * q[j * rank + k];
          ASSERT_NEAR(p[i * rank + k], s, 1e-4) << "rank " << rank << " row " << i;
        }
      }
      for (int64_t j = 0; j < cols; ++j) {
        for (int64_t k = 0; k < rank; ++k) {
          double s = 0;
          for (int64_t i = 0; i < rows; ++i) s += double(m[i * cols + j]) * p[i * rank + k];
          ASSERT_NEAR(q2[j * rank + k], s, 1e-3) << "rank " << rank << " col " << j;
        }
      }
    }
  }
}

// Error feedback fused into P = M Q: the error buffer ends as exactly
// error + input (one float addition per element) and P is M Q of that sum.
TEST(Kernels, AddThenMatmulLeavesTheSumAndItsProduct) {
  for (int64_t rank = 1; rank <= kStreamingMaxRank + 1; ++rank) {
    const int64_t rows = 6, cols = 29;
    std::vector<float> e(rows * cols), in(rows * cols), q(cols * rank), p(rows * rank),
        p_want(rows * rank);
    fill_standard_normal(e.data(), e.size(), 30 + rank);
    fill_standard_normal(in.data(), in.size(), 40 + rank);
    fill_standard_normal(q.data(), q.size(), 50 + rank);
    std::vector<float> sum = e;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += in[i];
    const std::vector<float> in_before = in;
    add_then_matmul_m_q(e.data(), in.data(), rows, cols, q.data(), rank, p.data());
    EXPECT_EQ(e, sum) << "rank " << rank;
    EXPECT_EQ(in, in_before);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t k = 0; k < rank; ++k) {
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += double(sum[i * cols + j]) * q[j * rank + k];
        ASSERT_NEAR(p[i * rank + k], s, 1e-4) << "rank " << rank << " row " << i;
      }
    }
  }
}

TEST(Kernels, DecompressIsPQtransposedAndUpdatesTheError) {
  for (int64_t rank : {1, 3}) {
    const int64_t rows = 9, cols = 37;
    std::vector<float> p(rows * rank), q(cols * rank), e(rows * cols);
    fill_standard_normal(p.data(), p.size(), 3);
    fill_standard_normal(q.data(), q.size(), 4);
    fill_standard_normal(e.data(), e.size(), 5);
    std::vector<float> want(rows * cols), e_want = e;
    matmul_p_qt(p.data(), q.data(), rows, cols, rank, want.data());
    subtract_inplace(e_want.data(), want.data(), e_want.size());
    std::vector<float> out(rows * cols), e_got = e;
    decompress_p_qt(p.data(), q.data(), rows, cols, rank, out.data(), e_got.data());
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], want[i], 1e-5) << i;
      ASSERT_NEAR(e_got[i], e_want[i], 1e-5) << i;
    }
    std::vector<float> out2(rows * cols);
    decompress_p_qt(p.data(), q.data(), rows, cols, rank, out2.data(), nullptr);
    EXPECT_EQ(out2, out);
  }
}

// The AVX2 path (intrinsics, two rows per sweep, where the CPU has it) and
// the portable loops give the same bits for every kernel, rank and shape
// with remainders: ranks on different CPUs stay identical.
TEST(Kernels, Avx2AndPortablePathsGiveTheSameBits) {
  if (!__builtin_cpu_supports("avx2")) {
    GTEST_SKIP() << "SKIPPED: this CPU has no AVX2; only the portable path runs here";
  }
  struct Outputs {
    std::vector<float> p, q, sum, p_of_sum, out, e;
  };
  auto run = [](int64_t rows, int64_t cols, int64_t rank, bool portable) {
    use_portable_powersgd_kernels_for_testing(portable);
    Outputs o;
    std::vector<float> m(rows * cols), in(rows * cols), q(cols * rank);
    fill_standard_normal(m.data(), m.size(), 60 + rank);
    fill_standard_normal(in.data(), in.size(), 70 + rank);
    fill_standard_normal(q.data(), q.size(), 80 + rank);
    o.p.resize(rows * rank);
    o.q.resize(cols * rank);
    matmul_m_q(m.data(), rows, cols, q.data(), rank, o.p.data());
    matmul_mt_p(m.data(), rows, cols, o.p.data(), rank, o.q.data());
    o.sum = m;
    o.p_of_sum.resize(rows * rank);
    add_then_matmul_m_q(o.sum.data(), in.data(), rows, cols, q.data(), rank, o.p_of_sum.data());
    o.out.resize(rows * cols);
    o.e = in;
    decompress_p_qt(o.p.data(), o.q.data(), rows, cols, rank, o.out.data(), o.e.data());
    use_portable_powersgd_kernels_for_testing(false);
    return o;
  };
  for (int64_t rank = 1; rank <= kStreamingMaxRank + 1; ++rank) {
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{7, 37}, {8, 64}, {13, 8}, {4, 3}, {1, 101}, {6, 1029}}) {
      const Outputs fast = run(rows, cols, rank, false), portable = run(rows, cols, rank, true);
      const std::string where = "rank " + std::to_string(rank) + " " + std::to_string(rows) +
                                "x" + std::to_string(cols);
      EXPECT_EQ(fast.p, portable.p) << "P = M Q, " << where;
      EXPECT_EQ(fast.q, portable.q) << "Q = M^T P, " << where;
      EXPECT_EQ(fast.sum, portable.sum) << "M + input, " << where;
      EXPECT_EQ(fast.p_of_sum, portable.p_of_sum) << "P = (M + input) Q, " << where;
      EXPECT_EQ(fast.out, portable.out) << "P Q^T, " << where;
      EXPECT_EQ(fast.e, portable.e) << "e - P Q^T, " << where;
    }
  }
}

TEST(Options, DefaultsAreTorchs) {
  PowerSGDOptions o;
  EXPECT_EQ(o.matrix_approximation_rank, 1);
  EXPECT_EQ(o.start_powerSGD_iter, 1000);
  EXPECT_EQ(o.min_compression_rate, 2);
  EXPECT_TRUE(o.use_error_feedback);
  EXPECT_TRUE(o.warm_start);
  EXPECT_EQ(o.orthogonalization_epsilon, 0);
  EXPECT_EQ(o.random_seed, 0u);
  EXPECT_EQ(o.compression_stats_logging_frequency, 10000);
  EXPECT_FALSE(o.batch_tensors_with_same_shape);
  EXPECT_TRUE(o.validate().ok());
}

TEST(Options, StartIterMustBeAtLeastTwoWithErrorFeedbackOrWarmStart) {
  PowerSGDOptions o;
  o.start_powerSGD_iter = 1;
  absl::Status s = o.validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("start_powerSGD_iter must be >= 2"), std::string::npos);
  EXPECT_FALSE(PowerSGDState::create(o).ok());
  o.use_error_feedback = false;
  EXPECT_FALSE(o.validate().ok());  // warm start still on
  o.warm_start = false;
  EXPECT_TRUE(o.validate().ok());
  o.start_powerSGD_iter = 0;
  EXPECT_TRUE(o.validate().ok());
  o.matrix_approximation_rank = 0;
  EXPECT_FALSE(o.validate().ok());
}

TEST(Options, ParsesEveryKey) {
  auto o = parse_powersgd_options({{"rank", "2"},
                                   {"start_iter", "10"},
                                   {"min_compression_rate", "1.5"},
                                   {"use_error_feedback", "0"},
                                   {"warm_start", "false"},
                                   {"epsilon", "1e-8"},
                                   {"seed", "12345678901234"},
                                   {"stats_frequency", "7"},
                                   {"batch_same_shape", "1"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->matrix_approximation_rank, 2);
  EXPECT_EQ(o->start_powerSGD_iter, 10);
  EXPECT_EQ(o->min_compression_rate, 1.5);
  EXPECT_FALSE(o->use_error_feedback);
  EXPECT_FALSE(o->warm_start);
  EXPECT_FLOAT_EQ(o->orthogonalization_epsilon, 1e-8f);
  EXPECT_EQ(o->random_seed, 12345678901234u);
  EXPECT_EQ(o->compression_stats_logging_frequency, 7);
  EXPECT_TRUE(o->batch_tensors_with_same_shape);
}

TEST(Options, BadOrUnknownOptionsAreNamed) {
  auto unknown = parse_powersgd_options({{"rnak", "2"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown option 'rnak'"), std::string::npos);
  auto bad = parse_powersgd_options({{"rank", "two"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank=two"), std::string::npos);
  auto bad_bool = parse_powersgd_options({{"warm_start", "yes"}});
  ASSERT_FALSE(bad_bool.ok());
  EXPECT_NE(bad_bool.status().message().find("warm_start=yes"), std::string::npos);
  auto too_early = parse_powersgd_options({{"start_iter", "1"}});
  ASSERT_FALSE(too_early.ok());
  EXPECT_NE(too_early.status().message().find(">= 2"), std::string::npos);
  EXPECT_FALSE(parse_powersgd_options({{"epsilon", "-1"}}).ok());
  EXPECT_FALSE(parse_powersgd_options({{"min_compression_rate", "0"}}).ok());
  EXPECT_FALSE(make_powersgd_hook(nullptr, {}, false).ok());
}

}  // namespace
}  // namespace ddpx
