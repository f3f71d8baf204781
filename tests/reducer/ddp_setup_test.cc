// What DDP does before and around training: the initial broadcast, the
// cross-rank parameter check, hook registration and checkpoint passthrough,
// and the per-step statistics.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/default_hooks.h"
#include "reducer/distributed_data_parallel.h"
#include "tests/reducer/ddp_training.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace reducer_test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kModelBytes = 4 * (kHidden * kIn + kHidden + kOut * kHidden + kOut);

TEST(DdpSetup, ConstructionBroadcastsParametersAndBuffersFromRank0) {
  ModelParameters expected_params;
  RegressionModel expected(expected_params, kIn, kHidden, kOut, /*seed=*/1000);
  rank_threads::run_groups(3, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, /*seed=*/1000 + rank);
    Tensor running_mean = Tensor::from_vector<double>({1.0 * rank, 2.0 * rank});
    ASSERT_TRUE(params.register_buffer("running_mean", running_mean).ok());
    if (rank != 0) {
      EXPECT_NE(model.flat_values(), expected.flat_values());
    }
    auto ddp = DistributedDataParallel::create(params, pg);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    EXPECT_EQ(model.flat_values(), expected.flat_values()) << "rank " << rank;
    EXPECT_THAT(running_mean.to_float_vector(), ::testing::ElementsAre(0.0f, 0.0f));
  });
}

TEST(DdpSetup, MismatchedShapeNamesTheParameterAndTheRank) {
  rank_threads::run_groups(3, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    ASSERT_TRUE(params.register_parameter("embedding", Tensor::zeros({4, 2}, DType::kFloat32)).ok());
    Shape head = rank == 2 ? Shape{3, 5} : Shape{5, 3};
    ASSERT_TRUE(params.register_parameter("head", Tensor::zeros(head, DType::kFloat32)).ok());
    auto ddp = DistributedDataParallel::create(params, pg);
    ASSERT_FALSE(ddp.ok());
    EXPECT_THAT(ddp.status().message(),
                HasSubstr("parameter 1 ('head') is float32[5, 3] on cpu on rank 0 but "
                          "float32[3, 5] on cpu on rank 2"));
  });
}

TEST(DdpSetup, MismatchedDtypeOrCountIsAnError) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    DType dtype = rank == 1 ? DType::kFloat64 : DType::kFloat32;
    ASSERT_TRUE(params.register_parameter("w", Tensor::zeros({2}, dtype)).ok());
    auto ddp = DistributedDataParallel::create(params, pg);
    ASSERT_FALSE(ddp.ok());
    EXPECT_THAT(ddp.status().message(), HasSubstr("float64[2] on cpu on rank 1"));
  });
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    for (int i = 0; i <= rank; ++i) {
      ASSERT_TRUE(params.register_parameter("w" + std::to_string(i), Tensor::zeros({2}, DType::kFloat32)).ok());
    }
    auto ddp = DistributedDataParallel::create(params, pg);
    ASSERT_FALSE(ddp.ok());
    EXPECT_THAT(ddp.status().message(), HasSubstr("rank 1 registered 2 parameters but rank 0 registered 1"));
  });
}

TEST(DdpSetup, ModelParametersRejectDuplicateNames) {
  ModelParameters params;
  ASSERT_TRUE(params.register_parameter("w", Tensor::zeros({2}, DType::kFloat32)).ok());
  auto again = params.register_buffer("w", Tensor::zeros({2}, DType::kFloat32));
  EXPECT_THAT(again.status().message(), HasSubstr("'w' is already registered as a parameter"));
  EXPECT_THAT(params.parameter_index("nope").status().message(), HasSubstr("no parameter named 'nope'"));
}

// A stateful hook: counts the buckets it has reduced and checkpoints that.
class CountingAllreduceHook : public CommHook {
 public:
  explicit CountingAllreduceHook(std::shared_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}
  std::string name() const override { return "counting_allreduce"; }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    ++buckets_reduced;
    return allreduce_average(*pg_, bucket.buffer());
  }
  absl::Status save_state(std::ostream& out) const override {
    out << buckets_reduced << "\n";
    return absl::OkStatus();
  }
  absl::Status load_state(std::istream& in) override {
    if (!(in >> buckets_reduced)) return absl::DataLossError("counting hook: no count in checkpoint");
    return absl::OkStatus();
  }
  int64_t buckets_reduced = 0;

 private:
  std::shared_ptr<ProcessGroup> pg_;
};

TEST(DdpSetup, HookRegistersOnceAndItsStateRoundTripsThroughCheckpoints) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    std::ostringstream empty;
    EXPECT_TRUE(ddp->save_hook_state(empty).ok());
    EXPECT_EQ(empty.str(), "") << "no hook, no state";

    auto hook = std::make_unique<CountingAllreduceHook>(pg);
    CountingAllreduceHook* counting = hook.get();
    ASSERT_TRUE(ddp->register_comm_hook(std::move(hook)).ok());
    absl::Status second = ddp->register_comm_hook(make_allreduce_hook(pg));
    EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.message(), HasSubstr("hook 'counting_allreduce' is already registered"));
    EXPECT_THAT(second.message(), HasSubstr("'allreduce'"));

    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(step, rank, 2, 2)).ok());
    }
    EXPECT_EQ(counting->buckets_reduced, 6);  // 2 buckets x 3 steps
    std::stringstream checkpoint;
    ASSERT_TRUE(ddp->save_hook_state(checkpoint).ok());

    ModelParameters params2;
    RegressionModel model2(params2, kIn, kHidden, kOut, 1000);
    auto resumed = DistributedDataParallel::create(params2, pg, small_buckets()).value();
    auto hook2 = std::make_unique<CountingAllreduceHook>(pg);
    CountingAllreduceHook* counting2 = hook2.get();
    ASSERT_TRUE(resumed->register_comm_hook(std::move(hook2)).ok());
    ASSERT_TRUE(resumed->load_hook_state(checkpoint).ok());
    EXPECT_EQ(counting2->buckets_reduced, 6);
  });
}

TEST(DdpSetup, StatsCountBucketsBytesAndCompression) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2)).ok());
    ReducerStats first = ddp->stats();
    EXPECT_EQ(first.step, 1u);
    EXPECT_EQ(first.num_buckets, 2u);
    EXPECT_EQ(first.gradient_bytes, kModelBytes);
    EXPECT_EQ(first.bytes_communicated, kModelBytes) << "allreduce sends each byte once";
    EXPECT_DOUBLE_EQ(first.compression_ratio, 1.0);
    EXPECT_TRUE(first.buckets_rebuilt);
    EXPECT_EQ(first.active_ranks, 2);
    EXPECT_GE(first.comm_wait_seconds, 0.0);
    EXPECT_GE(first.step_seconds, first.comm_wait_seconds);
    EXPECT_EQ(first.hook, "default (allreduce)");
    EXPECT_THAT(first.str(), HasSubstr("step 1 [default (allreduce)]: 2 buckets"));

    ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(1, rank, 2, 2)).ok());
    EXPECT_EQ(ddp->stats().step, 2u);
    EXPECT_FALSE(ddp->stats().buckets_rebuilt) << "buckets are rebuilt once";
  });
}

TEST(DdpSetup, Fp16HookHalvesTheBytesOnTheWire) {
  rank_threads::run_groups(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    ASSERT_TRUE(ddp->register_comm_hook(make_fp16_compress_hook(pg)).ok());
    ASSERT_TRUE(ddp_train_step(model, *ddp, rank_batch(0, rank, 2, 2)).ok());
    EXPECT_EQ(ddp->stats().gradient_bytes, kModelBytes);
    EXPECT_EQ(ddp->stats().bytes_communicated, kModelBytes / 2);
    EXPECT_DOUBLE_EQ(ddp->stats().compression_ratio, 2.0);
    EXPECT_EQ(ddp->stats().hook, "fp16");
  });
}

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
