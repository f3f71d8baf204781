// Every hook the registry builds, driven by the reducer over several
// buckets on several Gloo ranks: ranks stay identical bit for bit, stats see
// the compression, and the allreduce hook equals no hook exactly.
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

constexpr int kWorld = 3;
constexpr int kSteps = 5;

struct HookRun {
  std::vector<std::vector<float>> finals;  // per rank
  std::vector<float> last_ratio;           // per rank, last step
};

// spec "" means no hook.
HookRun train_with_hook(const std::string& spec) {
  HookRun run;
  run.finals.resize(kWorld);
  run.last_ratio.resize(kWorld);
  rank_threads::run_groups(kWorld, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    ModelParameters params;
    RegressionModel model(params, kIn, kHidden, kOut, 1000 + rank);
    auto ddp = DistributedDataParallel::create(params, pg, small_buckets()).value();
    if (!spec.empty()) {
      auto hook = make_comm_hook(spec, pg);
      ASSERT_TRUE(hook.ok()) << spec << ": " << hook.status();
      ASSERT_TRUE(ddp->register_comm_hook(std::move(*hook)).ok());
    }
    for (int step = 0; step < kSteps; ++step) {
      absl::Status s = ddp_train_step(model, *ddp, rank_batch(step, rank, kWorld, 2));
      ASSERT_TRUE(s.ok()) << spec << " rank " << rank << " step " << step << ": " << s;
    }
    run.finals[rank] = model.flat_values();
    run.last_ratio[rank] = static_cast<float>(ddp->stats().compression_ratio);
  });
  return run;
}

class HooksUnderDdpTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HooksUnderDdpTest, RanksStayIdentical) {
  const std::string spec = GetParam();
  HookRun run = train_with_hook(spec);
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(run.finals[r], run.finals[0]) << spec << " rank " << r;
  bool compresses = spec != "allreduce";
  if (compresses) {
    EXPECT_GT(run.last_ratio[0], 1.0f) << spec << " should send fewer bytes than the gradients";
  } else {
    EXPECT_FLOAT_EQ(run.last_ratio[0], 1.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, HooksUnderDdpTest,
                         ::testing::Values("allreduce", "fp16", "bf16", "int8",
                                           "powersgd:rank=1,start_iter=2",
                                           "batched_powersgd:rank=1,start_iter=2",
                                           "fp16+powersgd:rank=1,start_iter=2"));

TEST(HooksUnderDdp, AllreduceHookFromTheRegistryEqualsNoHook) {
  HookRun plain = train_with_hook("");
  HookRun hooked = train_with_hook("allreduce");
  EXPECT_EQ(plain.finals[0], hooked.finals[0]);
}

}  // namespace
}  // namespace reducer_test
}  // namespace ddpx
