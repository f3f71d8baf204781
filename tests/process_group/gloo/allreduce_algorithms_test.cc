// Every Gloo allreduce algorithm, forced, on world sizes 1 to 5.
#include "gtest/gtest.h"
#include "tests/process_group/gloo/allreduce_values.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using testing::local_options;
using testing::run_ranks;
using namespace ::ddpx::testing;

struct AlgorithmCase {
  AllreduceAlgorithm algorithm;
  int size;
};

class AllreduceAlgorithmTest : public ::testing::TestWithParam<AlgorithmCase> {};

TEST_P(AllreduceAlgorithmTest, SumsAndBitwiseAcrossSizes) {
  const auto [algorithm, size] = GetParam();
  GlooOptions options = local_options();
  options.allreduce_algorithm = algorithm;
  run_ranks(size, [&](GlooBackend& b) {
    // Sizes around the algorithms' chunking: tiny, odd, several chunks.
    for (int64_t n : {1, 257, 30011}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
        Tensor t = make_input(ReduceOp::SUM, dtype, b.rank(), n);
        ASSERT_WORK_OK(b.allreduce({t}, {}));
        expect_result(t, ReduceOp::SUM, size,
                      std::string(allreduce_algorithm_name(algorithm)) + " " +
                          dtype_name(dtype) + " n=" + std::to_string(n));
      }
      Tensor x = make_input(ReduceOp::BXOR, DType::kInt32, b.rank(), n);
      AllreduceOptions opts;
      opts.op = ReduceOp::BXOR;
      ASSERT_WORK_OK(b.allreduce({x}, opts));
      expect_result(x, ReduceOp::BXOR, size, "bxor");
    }
  });
}

std::vector<AlgorithmCase> algorithm_cases() {
  std::vector<AlgorithmCase> cases;
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    for (int size = 1; size <= 5; ++size) {
      // The bcube variants need a power-of-two world; the backend falls back
      // to gloo_ring elsewhere, which the test covers too.
      cases.push_back({a, size});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, AllreduceAlgorithmTest, ::testing::ValuesIn(algorithm_cases()),
    [](const ::testing::TestParamInfo<AlgorithmCase>& info) {
      return std::string(allreduce_algorithm_name(info.param.algorithm)) + "_" +
             std::to_string(info.param.size);
    });

TEST(AllreduceAlgorithmNames, RoundTripAndUnknownIsAnError) {
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    auto parsed = parse_allreduce_algorithm(allreduce_algorithm_name(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  auto bad = parse_allreduce_algorithm("tree");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tree"), std::string::npos);
  EXPECT_NE(bad.status().message().find("halving_doubling"), std::string::npos);
}

// The shipped table (docs/gloo.md, "Allreduce algorithm choice"), without
// sync pieces (a kernel that grants small socket buffers, or
// sync_max_bytes 0).
TEST(AllreduceAlgorithmChoice, ShippedTableWithoutSyncPieces) {
  using A = AllreduceAlgorithm;
  const size_t KiB = 1024, MiB = 1024 * KiB;
  EXPECT_EQ(choose_allreduce_algorithm(8, 1, true, 0), A::kGlooRing);
  EXPECT_EQ(choose_allreduce_algorithm(8, 2, true, 0), A::kRing);
  EXPECT_EQ(choose_allreduce_algorithm(64 * KiB, 2, true, 0), A::kRing);
  EXPECT_EQ(choose_allreduce_algorithm(64 * KiB + 1, 2, true, 0), A::kHalvingDoubling);
  EXPECT_EQ(choose_allreduce_algorithm(256 * KiB, 2, true, 0), A::kHalvingDoubling);
  EXPECT_EQ(choose_allreduce_algorithm(256 * KiB + 1, 2, true, 0), A::kGlooRing);
  for (int size : {3, 4, 5}) {
    EXPECT_EQ(choose_allreduce_algorithm(8, size, true, 0), A::kHalvingDoubling);
    EXPECT_EQ(choose_allreduce_algorithm(128 * KiB, size, true, 0), A::kHalvingDoubling);
    EXPECT_EQ(choose_allreduce_algorithm(128 * KiB + 1, size, true, 0), A::kGlooRing);
  }
  // A per-op timeout other than the group's rules out the classic classes.
  EXPECT_EQ(choose_allreduce_algorithm(8, 4, false, 0), A::kGlooRing);
  for (int size : {2, 4}) {
    EXPECT_EQ(choose_allreduce_algorithm(32 * MiB - 1, size, true, 0), A::kGlooRing);
    EXPECT_EQ(choose_allreduce_algorithm(32 * MiB, size, true, 0), A::kGlooRing4M);
  }
}

// With sync pairs that take pieces: the two-rank ring for small messages,
// halving-doubling (in pieces where large) up to 32 MiB, Gloo's ring with
// 4 MiB segments from there.
TEST(AllreduceAlgorithmChoice, ShippedTableWithSyncPieces) {
  using A = AllreduceAlgorithm;
  const size_t KiB = 1024, MiB = 1024 * KiB, piece = 2 * MiB;
  EXPECT_EQ(choose_allreduce_algorithm(8, 1, true, piece), A::kGlooRing);
  EXPECT_EQ(choose_allreduce_algorithm(64 * KiB, 2, true, piece), A::kRing);
  for (size_t bytes : {64 * KiB + 1, 1 * MiB, 32 * MiB - 1}) {
    EXPECT_EQ(choose_allreduce_algorithm(bytes, 2, true, piece), A::kHalvingDoubling);
  }
  for (int size : {3, 4, 5}) {
    for (size_t bytes : {size_t{8}, 128 * KiB + 1, 32 * MiB - 1}) {
      EXPECT_EQ(choose_allreduce_algorithm(bytes, size, true, piece), A::kHalvingDoubling);
    }
  }
  for (int size : {2, 4}) {
    EXPECT_EQ(choose_allreduce_algorithm(32 * MiB, size, true, piece), A::kGlooRing4M);
  }
  // Still only unbound algorithms under a per-op timeout.
  EXPECT_EQ(choose_allreduce_algorithm(8, 4, false, piece), A::kGlooRing);
  EXPECT_EQ(choose_allreduce_algorithm(64 * MiB, 2, false, piece), A::kGlooRing4M);
}

}  // namespace
}  // namespace ddpx
