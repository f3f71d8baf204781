// Uneven inputs: ranks with fewer batches join and shadow the others'
// collectives until every rank is done; or, on request, every rank fails
// naming the one that ran out.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/registry.h"
#include "reducer/join.h"
#include "tests/reducer/ddp_training.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace reducer_test {
namespace {

using ::testing::HasSubstr;

constexpr int kPerRank = 2;

// Single-process reference: at each step the ranks that still have a batch
// contribute its mean gradient, and the sum is divided by the world size.
std::vector<float> reference_with_joins(const std::vector<int>& batches) {
  const int world = static_cast<int>(batches.size());
  int steps = 0;
  for (int b : batches) steps = std::max(steps, b);
  ModelParameters params;
  RegressionModel model(params, kIn, kHidden, kOut, 1000);
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < world; ++r) {
      if (step >= batches[r]) continue;
      model.forward_backward(rank_batch(step, r, world, kPerRank),
                             [](size_t) { return absl::OkStatus(); })
          .value();
    }
    for (size_t p = 0; p < params.num_parameters(); ++p) {
      float* g = params.parameter(p).grad.data_as<float>();
      for (int64_t i = 0; i < params.parameter(p).grad.numel(); ++i) g[i] /= world;
    }
    model.sgd_step(kLr);
  }
  return model.flat_values();
}

// `hook` is a registry spec, or empty for none.
void check_join(const std::vector<int>& batches, const std::string& hook, bool bucket_view,
                bool compare_to_reference = true) {
  const int world = static_cast<int>(batches.size());
  std::vector<std::vector<float>> finals(world);
  rank_threads::run_groups(world, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000 + rank);
    auto ddp = make_small_bucket_ddp(params, pg, bucket_view);
    if (!hook.empty()) {
      ASSERT_TRUE(ddp->register_comm_hook(make_comm_hook(hook, pg).value()).ok());
    }
    Join join(*ddp);
    for (int step = 0; step < batches[rank]; ++step) {
      absl::Status s = ddp_train_step(model, *ddp, rank_batch(step, rank, world, kPerRank));
      ASSERT_TRUE(s.ok()) << "rank " << rank << " step " << step << ": " << s;
    }
    absl::Status s = join.join();
    ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s;
    int most = *std::max_element(batches.begin(), batches.end());
    EXPECT_EQ(join.shadowed_steps(), most - batches[rank]) << "rank " << rank;
    finals[rank] = model.flat_values();
  });
  std::vector<float> expected = reference_with_joins(batches);
  for (int r = 1; r < world; ++r) EXPECT_EQ(finals[r], finals[0]) << "rank " << r;
  if (!compare_to_reference) return;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(finals[0][i], expected[i], 2e-5) << i;
}

TEST(Join, UnevenInputsFinishWithEqualModels) { check_join({1, 3, 2}, "", false); }
TEST(Join, WithTheAllreduceHookAndBucketViews) { check_join({3, 2, 4, 1}, "allreduce", true); }
// A stateful hook with several collectives per bucket: joined ranks run it on
// zeros, so its collectives and iteration count stay in step everywhere.
TEST(Join, WithPowerSgd) { check_join({2, 5, 3}, "powersgd:rank=1,start_iter=2", false, false); }
// Rank 0 never trains: its ready order never exists, so buckets are not
// rebuilt, consistently on every rank.
TEST(Join, Rank0WithNoInputs) { check_join({0, 2}, "", false); }
TEST(Join, EvenInputsShadowNothing) { check_join({2, 2}, "", false); }

TEST(Join, ThrowOnEarlyTerminationNamesTheRankThatRanOut) {
  rank_threads::run_groups(3, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    JoinOptions options;
    options.throw_on_early_termination = true;
    Join join(*ddp, options);
    const int batches = rank == 2 ? 1 : 3;
    absl::Status failed;
    for (int step = 0; step < batches && failed.ok(); ++step) {
      failed = ddp_train_step(model, *ddp, rank_batch(step, rank, 3, kPerRank));
    }
    absl::Status joined = join.join();
    if (rank == 2) {
      EXPECT_TRUE(failed.ok()) << failed;
      EXPECT_THAT(joined.message(), HasSubstr("rank 2 ran out of inputs while rank 0, rank 1 still had some"));
    } else {
      EXPECT_THAT(failed.message(), HasSubstr("rank 2 ran out of inputs (joined) before this rank"));
    }
  });
}

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
