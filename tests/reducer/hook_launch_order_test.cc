// When the reducer hands bucket k+1 to the hook while bucket k's future is
// still pending: at once for hooks that issue all their collectives inside
// run() (overlap), only after bucket k completed for hooks that issue more
// from callbacks (so every rank issues collectives in one order).
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/registry.h"
#include "reducer/distributed_data_parallel.h"
#include "tests/reducer/ddp_training.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace reducer_test {
namespace {

using M = RegressionModel;

// Leaves bucket 0's future pending until the test completes it; later
// buckets complete at once. Records which buckets run() has seen.
class HeldFirstBucketHook : public CommHook {
 public:
  explicit HeldFirstBucketHook(bool issues_after_run) : issues_after_run_(issues_after_run) {}
  std::string name() const override { return "held_first_bucket"; }
  bool issues_collectives_after_run() const override { return issues_after_run_; }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    launched.push_back(bucket.index());
    if (bucket.index() != 0) return Future<Tensor>::ready(bucket.buffer());
    first_buffer = bucket.buffer();
    first = Future<Tensor>::create();
    return first;
  }

  std::vector<size_t> launched;
  std::shared_ptr<Future<Tensor>> first;
  Tensor first_buffer;

 private:
  const bool issues_after_run_;
};

// Marks bucket 0's and then bucket 1's gradients ready, and returns the
// buckets launched before bucket 0's future completes.
std::vector<size_t> launched_while_first_pending(bool issues_after_run) {
  std::vector<size_t> launched_early;
  rank_threads::run_groups(1, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000 + rank);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    auto hook = std::make_unique<HeldFirstBucketHook>(issues_after_run);
    HeldFirstBucketHook* held = hook.get();
    ASSERT_TRUE(ddp->register_comm_hook(std::move(hook)).ok());
    Reducer& reducer = ddp->reducer();
    ASSERT_TRUE(reducer.prepare_for_backward().ok());
    // small_buckets(): bucket 0 is {b2, w2}, bucket 1 is {b1, w1}.
    for (size_t p : {M::kB2, M::kW2, M::kB1, M::kW1}) ASSERT_TRUE(reducer.mark_ready(p).ok());
    launched_early = held->launched;
    ASSERT_NE(held->first, nullptr);
    held->first->set_value(held->first_buffer);
    absl::Status s = reducer.finalize_backward();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(held->launched, (std::vector<size_t>{0, 1}));
  });
  return launched_early;
}

TEST(HookLaunchOrder, HookWithOnlyInRunCollectivesOverlapsBuckets) {
  EXPECT_EQ(launched_while_first_pending(false), (std::vector<size_t>{0, 1}));
}

TEST(HookLaunchOrder, HookWithLaterCollectivesWaitsForThePreviousBucket) {
  EXPECT_EQ(launched_while_first_pending(true), (std::vector<size_t>{0}));
}

TEST(HookLaunchOrder, BuiltInHooksSayWhetherTheyIssueCollectivesLater) {
  rank_threads::run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    for (const char* spec : {"allreduce", "fp16", "bf16", "noop", "fp16+allreduce"}) {
      auto hook = make_comm_hook(spec, pg);
      ASSERT_TRUE(hook.ok()) << spec << ": " << hook.status();
      EXPECT_FALSE((*hook)->issues_collectives_after_run()) << spec;
    }
    for (const char* spec : {"powersgd", "batched_powersgd", "int8", "fp16+powersgd"}) {
      auto hook = make_comm_hook(spec, pg);
      ASSERT_TRUE(hook.ok()) << spec << ": " << hook.status();
      EXPECT_TRUE((*hook)->issues_collectives_after_run()) << spec;
    }
  });
}

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
