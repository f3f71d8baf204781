// The DDP invariant: N ranks training under DDP end with the same
// parameters, bit for bit across ranks, as one process trained on the union
// of their batches (within float rounding), with no hook, with the allreduce
// hook, and with gradients as bucket views.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/default_hooks.h"
#include "reducer/distributed_data_parallel.h"
#include "tests/reducer/ddp_training.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace reducer_test {
namespace {

constexpr int kSteps = 5;
constexpr int kPerRank = 3;

enum class Variant { kNoHook, kAllreduceHook, kBucketView };

struct Case {
  int world;
  Variant variant;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const char* v = info.param.variant == Variant::kNoHook          ? "NoHook"
                  : info.param.variant == Variant::kAllreduceHook ? "AllreduceHook"
                                                                  : "BucketView";
  return std::string(v) + "_" + std::to_string(info.param.world) + "ranks";
}

// Final parameters of every rank.
std::vector<std::vector<float>> train_ddp(int world, Variant variant) {
  std::vector<std::vector<float>> finals(world);
  rank_threads::run_groups(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    // Every rank starts from different values: DDP's broadcast fixes that.
    RegressionModel model(params, kIn, kHidden, kOut, /*seed=*/1000 + rank);
    DDPOptions options = small_buckets();
    options.gradient_as_bucket_view = variant == Variant::kBucketView;
    auto ddp = DistributedDataParallel::create(params, pg, options);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    if (variant == Variant::kAllreduceHook) {
      ASSERT_TRUE((*ddp)->register_comm_hook(make_allreduce_hook(pg)).ok());
    }
    EXPECT_EQ((*ddp)->reducer().bucket_assignment().size(), 2u);
    for (int step = 0; step < kSteps; ++step) {
      absl::Status s = ddp_train_step(model, **ddp, rank_batch(step, rank, world, kPerRank));
      ASSERT_TRUE(s.ok()) << "rank " << rank << " step " << step << ": " << s;
    }
    finals[rank] = model.flat_values();
  });
  return finals;
}

class DdpInvariantTest : public ::testing::TestWithParam<Case> {};

TEST_P(DdpInvariantTest, RanksAgreeBitForBitAndMatchOneProcessOnTheUnion) {
  const Case c = GetParam();
  std::vector<std::vector<float>> finals = train_ddp(c.world, c.variant);
  ASSERT_EQ(finals[0].size(), static_cast<size_t>(kHidden * kIn + kHidden + kOut * kHidden + kOut));
  for (int r = 1; r < c.world; ++r) {
    EXPECT_EQ(finals[r], finals[0]) << "rank " << r << " differs from rank 0";
  }
  std::vector<float> reference = train_single_process(c.world, kSteps, kPerRank);
  std::vector<float> start = train_single_process(c.world, 0, kPerRank);
  double moved = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_NEAR(finals[0][i], reference[i], 2e-5 * std::max(1.0f, std::fabs(reference[i])))
        << "parameter element " << i;
    moved += std::fabs(reference[i] - start[i]);
  }
  EXPECT_GT(moved, 0.01) << "training did not move the parameters; the test would prove nothing";
}

INSTANTIATE_TEST_SUITE_P(
    AllWorldSizes, DdpInvariantTest,
    ::testing::Values(Case{1, Variant::kNoHook}, Case{2, Variant::kNoHook},
                      Case{3, Variant::kNoHook}, Case{4, Variant::kNoHook},
                      Case{1, Variant::kAllreduceHook}, Case{2, Variant::kAllreduceHook},
                      Case{3, Variant::kAllreduceHook}, Case{4, Variant::kAllreduceHook},
                      Case{2, Variant::kBucketView}, Case{4, Variant::kBucketView}),
    case_name);

TEST(DdpInvariant, NoHookAndAllreduceHookGiveIdenticalBits) {
  for (int world : {3, 4}) {
    std::vector<std::vector<float>> plain = train_ddp(world, Variant::kNoHook);
    std::vector<std::vector<float>> hooked = train_ddp(world, Variant::kAllreduceHook);
    std::vector<std::vector<float>> views = train_ddp(world, Variant::kBucketView);
    EXPECT_EQ(plain[0], hooked[0]) << world << " ranks";
    EXPECT_EQ(plain[0], views[0]) << world << " ranks";
  }
}

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
