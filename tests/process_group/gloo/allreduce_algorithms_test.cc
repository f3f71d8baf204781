// Every Gloo allreduce algorithm, forced, on world sizes 1 to 5.
#include "gtest/gtest.h"
#include "tests/process_group/gloo/allreduce_values.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using namespace ::ddpx::gloo_test;
using namespace ::ddpx::rank_threads;

struct AlgorithmCase {
  AllreduceAlgorithm algorithm;
  int size;
};

class AllreduceAlgorithmTest : public ::testing::TestWithParam<AlgorithmCase> {};

TEST_P(AllreduceAlgorithmTest, SumsAndBitwiseAcrossSizes) {
  const auto [algorithm, size] = GetParam();
  GlooOptions options = local_gloo_options();
  options.allreduce_algorithm = algorithm;
  run_gloo_backends(size, [&](GlooBackend& b) {
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
// sync pieces (a kernel that grants small socket buffers). The backend runs
// a classic pick only where it fits on the sync pairs, else Gloo's ring.
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
  // A group without sync pairs (sync_max_bytes 0) runs unbound algorithms.
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
  // Still only unbound algorithms without sync pairs.
  EXPECT_EQ(choose_allreduce_algorithm(8, 4, false, piece), A::kGlooRing);
  EXPECT_EQ(choose_allreduce_algorithm(64 * MiB, 2, false, piece), A::kGlooRing4M);
}

// What the backend runs where: the table's classic picks on the sync pairs
// (whole, or halving-doubling in pieces), everything else, and every
// classic pick without sync pairs, as Gloo's unbound-buffer algorithms on
// the event-loop pairs. Whatever a rank's op timeout.
TEST(AllreducePlan, ClassicAlgorithmsRunOnTheSyncPairsOnly) {
  using A = AllreduceAlgorithm;
  using Where = AllreducePlan::Where;
  run_gloo_backends(2, [&](GlooBackend& b) {
    const auto small = b.execution_plan().tcp_allreduce(8);
    EXPECT_EQ(small.algorithm, A::kRing);
    EXPECT_EQ(small.where, Where::kSyncPairs);
    const auto huge = b.execution_plan().tcp_allreduce(size_t{64} << 20);
    EXPECT_EQ(huge.algorithm, A::kGlooRing4M);
    EXPECT_EQ(huge.where, Where::kEventLoop);
    if (b.execution_plan().sync_piece_bytes() > 0) {
      const auto pieces = b.execution_plan().tcp_allreduce(size_t{8} << 20);
      EXPECT_EQ(pieces.algorithm, A::kHalvingDoubling);
      EXPECT_EQ(pieces.where, Where::kSyncPieces);
    }
  });
  GlooOptions no_sync = local_gloo_options();
  no_sync.sync_max_bytes = 0;
  run_gloo_backends(2, [&](GlooBackend& b) {
    for (size_t bytes : {size_t{8}, size_t{100} << 10, size_t{8} << 20}) {
      const auto plan = b.execution_plan().tcp_allreduce(bytes);
      EXPECT_FALSE(is_classic_allreduce(plan.algorithm)) << bytes;
      EXPECT_EQ(plan.where, Where::kEventLoop) << bytes;
    }
  }, no_sync);
  // A forced classic algorithm the sync pairs cannot take gives way too.
  GlooOptions forced = local_gloo_options();
  forced.allreduce_algorithm = A::kRing;
  run_gloo_backends(3, [&](GlooBackend& b) {
    EXPECT_EQ(b.execution_plan().tcp_allreduce(8).algorithm, A::kRing);
    const auto beyond = b.execution_plan().tcp_allreduce(kSyncPairMaxMessageBytes + 4);
    EXPECT_EQ(beyond.algorithm, A::kGlooRing);
    EXPECT_EQ(beyond.where, Where::kEventLoop);
  }, forced);
}

}  // namespace
}  // namespace ddpx
