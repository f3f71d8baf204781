// DDP with several large buckets in flight at once, per hook.
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// A model of ~1.9M parameters gives DDP two buckets of 1 MiB and ~6 MiB whose
// collectives run concurrently: what the 100K-parameter runs above never
// exercise. A hang becomes an error through --timeout_s.
class TrainLargeBucketsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainLargeBucketsTest, SeveralLargeBucketsTrainWithoutHangOrError) {
  const std::string dir = fresh_dir("large_" + std::to_string(
      std::hash<std::string>()(GetParam())));
  RunResult r = run_command(std::string(kTrainBinary) +
                            " --nproc=2 --hidden=1024,1024 --batch_size=32 --max_steps=8"
                            " --timeout_s=20 --log_every=100 --hook='" + GetParam() +
                            "' --metrics_out=" + dir + "/m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<MetricsLine> steps = lines_of_type(read_metrics(dir + "/m.jsonl"), "step");
  ASSERT_EQ(steps.size(), 8u) << r.output;
  EXPECT_LT(number(steps.back(), "loss"), number(steps.front(), "loss")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Hooks, TrainLargeBucketsTest,
                         ::testing::Values("allreduce", "fp16", "int8",
                                           "powersgd:rank=2,start_iter=2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.substr(0, info.param.find(':'));
                         });

}  // namespace
}  // namespace ddpx::integration_test
