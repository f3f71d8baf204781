// One training step's rules: the bucket rebuild from rank 0's ready order,
// unused parameters with and without find_unused_parameters, no_sync
// accumulation, and mark_ready misuse.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reducer/distributed_data_parallel.h"
#include "tests/reducer/ddp_training.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace reducer_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using M = RegressionModel;

TEST(DdpStep, BucketsAreRebuiltOnceFromRank0sReadyOrder) {
  constexpr int kWorld = 3;
  std::vector<std::vector<float>> finals(kWorld);
  rank_threads::run_groups(kWorld, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000 + rank);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    // Reverse registration order: {b2, w2} fills the 100-byte first bucket.
    EXPECT_THAT(ddp->reducer().bucket_assignment(),
                ElementsAre(ElementsAre(M::kB2, M::kW2), ElementsAre(M::kB1, M::kW1)));
    // Rank 0 produces w1 first; the other ranks use other orders, and must
    // still end up with rank 0's layout.
    std::vector<size_t> order = rank == 0   ? std::vector<size_t>{M::kW1, M::kB1, M::kW2, M::kB2}
                                : rank == 1 ? std::vector<size_t>{M::kB2, M::kW2, M::kB1, M::kW1}
                                            : std::vector<size_t>{M::kB1, M::kB2, M::kW1, M::kW2};
    for (int step = 0; step < 4; ++step) {
      absl::Status s = ddp_train_step(model, *ddp, rank_batch(step, rank, kWorld, 2), true, order);
      ASSERT_TRUE(s.ok()) << s;
      if (step == 0) {
        EXPECT_TRUE(ddp->stats().buckets_rebuilt);
        // w1 (240 B) alone passes the 100-byte first cap; the rest share one.
        EXPECT_THAT(ddp->reducer().bucket_assignment(),
                    ElementsAre(ElementsAre(M::kW1), ElementsAre(M::kB1, M::kW2, M::kB2)));
      }
    }
    EXPECT_TRUE(ddp->reducer().buckets_rebuilt());
    finals[rank] = model.flat_values();
  });
  std::vector<float> reference = train_single_process(kWorld, 4, 2);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(finals[r], finals[0]) << "rank " << r;
  }
  for (size_t i = 0; i < reference.size(); ++i) EXPECT_NEAR(finals[0][i], reference[i], 2e-5);
}

// For checkpoints: the rebuilt layout can be read back and restored in a
// fresh reducer, which then skips its own rebuild.
TEST(DdpStep, RebuiltOrderRestoresTheSameBuckets) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    std::vector<size_t> order = {M::kW1, M::kB1, M::kW2, M::kB2};
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    EXPECT_TRUE(ddp->reducer().rebuilt_order().empty());
    ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2), true, order).ok());
    const std::vector<size_t> saved = ddp->reducer().rebuilt_order();
    EXPECT_THAT(saved, ElementsAre(M::kW1, M::kB1, M::kW2, M::kB2));

    ModelParameters params2;
    RegressionModel model2(params2, kIn, kHidden, kOut, 1000);
    auto fresh = DistributedDataParallel::create(params2, pg, small_buckets()).value();
    Reducer& r = fresh->reducer();
    EXPECT_THAT(r.restore_rebuilt_order({M::kW1, M::kB1}).message(), HasSubstr("has 2 parameters"));
    EXPECT_THAT(r.restore_rebuilt_order({M::kW1, M::kW1, M::kW2, M::kB2}).message(),
                HasSubstr("appears twice"));
    ASSERT_TRUE(r.restore_rebuilt_order(saved).ok());
    EXPECT_EQ(r.bucket_assignment(), ddp->reducer().bucket_assignment());
    EXPECT_TRUE(r.buckets_rebuilt());
    // Ranks mark in another order now; the layout stays.
    std::vector<size_t> other = {M::kB2, M::kW2, M::kB1, M::kW1};
    ASSERT_TRUE(ddp_train_step(model2, *fresh, rank_batch(1, rank, 2, 2), true, other).ok());
    EXPECT_FALSE(fresh->stats().buckets_rebuilt);
    EXPECT_EQ(r.bucket_assignment(), ddp->reducer().bucket_assignment());
  });
}

// A backward pass cut short: abandon_step drains what was launched, sends
// nothing more, and the next step works.
TEST(DdpStep, AbandonedStepLeavesTheReducerUsable) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    Reducer& r = ddp->reducer();
    r.abandon_step();  // outside a step: nothing
    // Both ranks mark the first bucket ({b2, w2}), which launches, then stop.
    ASSERT_TRUE(ddp->mark_ready(M::kB2).ok());
    ASSERT_TRUE(ddp->mark_ready(M::kW2).ok());
    EXPECT_TRUE(r.in_step());
    r.abandon_step();
    EXPECT_FALSE(r.in_step());
    params.zero_grad();
    std::vector<size_t> order = {M::kB2, M::kW2, M::kB1, M::kW1};
    absl::Status s = ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2), true, order);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(ddp->stats().step, 1u);
    // The abandoned step's partial ready order does not block the rebuild.
    EXPECT_TRUE(ddp->stats().buckets_rebuilt);
  });
}

TEST(DdpStep, RebuildKeepsGradientViewsInPlace) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    DDPOptions options = small_buckets();
    options.gradient_as_bucket_view = true;
    auto ddp = DistributedDataParallel::create(params, pg, options).value();
    std::vector<size_t> order = {M::kW1, M::kB1, M::kW2, M::kB2};
    ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2), /*apply=*/false, order).ok());
    // The averaged gradients survive the rebuild, now in the new buckets.
    std::vector<float> grads_after = params.parameter(M::kW1).grad.to_float_vector();
    float norm = 0;
    for (float g : grads_after) norm += g * g;
    EXPECT_GT(norm, 0.0f);
    ASSERT_TRUE(ddp->stats().buckets_rebuilt);
    // Each gradient is a view into a bucket buffer that holds exactly the
    // parameters the new assignment lists.
    EXPECT_TRUE(params.parameter(M::kB1).grad.shares_storage_with(params.parameter(M::kB2).grad));
    EXPECT_FALSE(params.parameter(M::kW1).grad.shares_storage_with(params.parameter(M::kB1).grad));
  });
}

TEST(DdpStep, FindUnusedParametersMarksThemReadyAndAverages) {
  constexpr int kWorld = 3;
  std::vector<std::vector<float>> finals(kWorld);
  for (bool announce_in_prepare : {false, true}) {
    std::vector<std::vector<float>> b1_final(kWorld), w2_final(kWorld);
    rank_threads::run_groups(kWorld, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      ModelParameters params;
      RegressionModel model(params, kIn, kHidden, kOut, 1000);
      DDPOptions options = small_buckets();
      options.find_unused_parameters = true;
      auto ddp = DistributedDataParallel::create(params, pg, options).value();
      std::vector<float> b1_start = params.parameter(M::kB1).value.to_float_vector();
      // b1 is unused everywhere; w2 only on rank 1.
      std::vector<size_t> skip = {M::kB1};
      if (rank == 1) skip.push_back(M::kW2);
      for (int step = 0; step < 3; ++step) {
        if (announce_in_prepare) {
          ASSERT_TRUE(ddp->prepare_for_backward(skip).ok());
        }
        Batch batch = rank_batch(step, rank, kWorld, 2);
        auto loss = model.forward_backward(batch, [&](size_t p) { return ddp->mark_ready(p); }, {}, skip);
        ASSERT_TRUE(loss.ok()) << loss.status();
        absl::Status s = ddp->finalize_backward();
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(ddp->stats().unused_parameters, rank == 1 ? 2u : 1u);
        model.sgd_step(kLr);
      }
      EXPECT_EQ(params.parameter(M::kB1).value.to_float_vector(), b1_start)
          << "a parameter unused on every rank gets a zero average";
      b1_final[rank] = model.flat_values();
    });
    for (int r = 1; r < kWorld; ++r) EXPECT_EQ(b1_final[r], b1_final[0]) << "rank " << r;
    finals[announce_in_prepare ? 1 : 0] = b1_final[0];
  }
  EXPECT_EQ(finals[0], finals[1]) << "announcing unused parameters early changes nothing";
}

// torch's rule: a parameter no rank used keeps its grad as it was (here a
// value of each rank's own); one that some rank used gets the average, this
// rank's share being its current local grad. With bucket views the grad is
// the bucket, so it holds the average either way (as in torch).
TEST(DdpStep, ParameterNoRankUsedKeepsItsGrad) {
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "bucket views" : "copies");
    std::vector<std::vector<float>> w2_grads(2);
    rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      ModelParameters params;
      RegressionModel model(params, kIn, kHidden, kOut, 1000);
      DDPOptions options = small_buckets();
      options.find_unused_parameters = true;
      options.gradient_as_bucket_view = view;
      auto ddp = DistributedDataParallel::create(params, pg, options).value();
      Tensor& b1 = params.parameter(M::kB1).grad;
      for (int64_t i = 0; i < b1.numel(); ++i) b1.data_as<float>()[i] = 5.0f + rank;
      // b1: unused everywhere. w2: unused on rank 0 only.
      std::vector<size_t> skip = {M::kB1};
      if (rank == 0) skip.push_back(M::kW2);
      auto loss = model.forward_backward(rank_batch(0, rank, 2, 2),
                                         [&](size_t p) { return ddp->mark_ready(p); }, {}, skip);
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE(ddp->finalize_backward().ok());
      EXPECT_THAT(ddp->reducer().globally_unused(), ElementsAre(M::kB1));
      for (float g : params.parameter(M::kB1).grad.to_float_vector()) {
        EXPECT_EQ(g, view ? 5.5f : 5.0f + rank) << "rank " << rank;
      }
      w2_grads[rank] = params.parameter(M::kW2).grad.to_float_vector();
    });
    EXPECT_EQ(w2_grads[0], w2_grads[1]) << "w2, used on rank 1 only, gets the average";
  }
}

TEST(DdpStep, UnusedParameterWithoutTheFlagIsAnErrorNamingIt) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    absl::Status s = ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2), true, {}, {M::kB1});
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("received no gradient in this backward pass: 'b1' (index 1)"));
    EXPECT_THAT(s.message(), HasSubstr("find_unused_parameters=true"));
    model.params().zero_grad();
    // The failed step left nothing behind: the next one works.
    absl::Status next = ddp_train_step(model, *ddp, rank_batch(1, rank, 2, 2));
    EXPECT_TRUE(next.ok()) << next;
    absl::Status early = ddp->prepare_for_backward({M::kB1});
    EXPECT_THAT(early.message(), HasSubstr("without find_unused_parameters"));
  });
}

TEST(DdpStep, MarkReadyMisuseIsAnError) {
  rank_threads::run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    ASSERT_TRUE(params.register_parameter("frozen", Tensor::zeros({3}, DType::kFloat32), false).ok());
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    EXPECT_THAT(ddp->mark_ready(9).message(), HasSubstr("parameter index 9 out of range (the model has 5"));
    EXPECT_THAT(ddp->mark_ready(4).message(), HasSubstr("'frozen' (index 4) does not require grad"));
    ASSERT_TRUE(ddp->mark_ready(M::kB2).ok());
    EXPECT_THAT(ddp->mark_ready(M::kB2).message(), HasSubstr("'b2' (index 3) was marked ready twice"));
    EXPECT_THAT(ddp->prepare_for_backward().message(), HasSubstr("previous backward pass was not finalized"));
    for (size_t p : {M::kW2, M::kB1, M::kW1}) ASSERT_TRUE(ddp->mark_ready(p).ok());
    EXPECT_TRUE(ddp->finalize_backward().ok());
  });
}

// Each rank runs kMicro microbatches, all but the last under no_sync; the
// result must equal one step on all of them (gradients summed over
// microbatches, averaged over ranks).
void check_no_sync(bool bucket_view) {
  constexpr int kWorld = 2, kMicro = 3, kPerMicro = 2;
  std::vector<std::vector<float>> finals(kWorld);
  rank_threads::run_groups(kWorld, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000 + rank);
    auto ddp = make_small_bucket_ddp(params, pg, bucket_view);
    for (int step = 0; step < 2; ++step) {
      uint64_t sent_before = pg->counters().payload_bytes.load();
      {
        auto guard = ddp->no_sync();
        for (int m = 0; m < kMicro - 1; ++m) {
          Batch b = rank_batch(step * kMicro + m, rank, kWorld, kPerMicro);
          ASSERT_TRUE(ddp_train_step(model, *ddp, b, /*apply=*/false).ok());
        }
      }
      EXPECT_EQ(pg->counters().payload_bytes.load(), sent_before) << "no_sync must not communicate";
      Batch last = rank_batch(step * kMicro + kMicro - 1, rank, kWorld, kPerMicro);
      ASSERT_TRUE(ddp_train_step(model, *ddp, last).ok());
      EXPECT_EQ(ddp->stats().step, static_cast<uint64_t>(step + 1));
    }
    finals[rank] = model.flat_values();
  });
  ModelParameters params;
  RegressionModel reference(params, kIn, kHidden, kOut, 1000);
  for (int step = 0; step < 2; ++step) {
    for (int m = 0; m < kMicro; ++m) {
      std::vector<Batch> parts;
      for (int r = 0; r < kWorld; ++r) parts.push_back(rank_batch(step * kMicro + m, r, kWorld, kPerMicro));
      reference.forward_backward(concat(parts), [](size_t) { return absl::OkStatus(); }).value();
    }
    reference.sgd_step(kLr);
  }
  std::vector<float> expected = reference.flat_values();
  EXPECT_EQ(finals[1], finals[0]);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(finals[0][i], expected[i], 2e-5) << i;
}

TEST(DdpStep, NoSyncAccumulationEqualsOneBiggerStep) { check_no_sync(false); }
TEST(DdpStep, NoSyncAccumulationWithBucketViews) { check_no_sync(true); }

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
