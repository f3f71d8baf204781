// The libtorch trainer in elastic mode with real processes:
// examples/torch/train --elastic --nproc=3 (the residual CNN through
// ddpx::torch::DistributedDataParallel, the launcher serving the store),
// one rank killed with kill -9: the other two re-form, finish the epoch,
// and end with bit-identical parameters.
#include <signal.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

TEST(TorchElasticTest, KillOneOfThreeTheOthersFinishWithTheSameParameters) {
  const std::set<std::string> before = shm_segments();
  // 960 images, 3 ranks x 16: 20 steps; one thread per rank.
  ElasticJob job("torch_kill", 3,
                 {"--width=4", "--batch_size=16", "--train_limit=960", "--epochs=1",
                  "--threads=1", "--log_every=1000", "--timeout_s=10", "--heartbeat_s=0.5"},
                 "examples/torch/train");
  ASSERT_TRUE(job.wait_for_step(5, seconds(120))) << job.output();
  const pid_t victim = job.rank_pid(1);
  ASSERT_GT(victim, 0) << job.output();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  std::optional<launcher::ExitStatus> end = job.wait(seconds(240));
  ASSERT_TRUE(end.has_value()) << "the job hung after the kill:\n" << job.output();
  const std::string out = job.output();
  EXPECT_EQ(end->exit_code, 0) << out;
  const std::vector<std::string> changes = job.metrics_lines("membership");
  ASSERT_EQ(changes.size(), 1u) << out;
  EXPECT_EQ(json_field(changes[0], "world_size"), "2") << changes[0];
  EXPECT_EQ(json_field(changes[0], "steps_lost"), "1") << changes[0];
  // 960 samples: 48 a step on 3 ranks, 32 on 2; every sample once, so more
  // steps than 20 and at most 30.
  const std::vector<std::string> epochs = job.metrics_lines("epoch");
  ASSERT_EQ(epochs.size(), 1u) << out;
  const int64_t steps = std::stoll(json_field(epochs[0], "step"));
  EXPECT_GT(steps, 20) << epochs[0];
  EXPECT_LE(steps, 30) << epochs[0];
  EXPECT_NE(out.find("done:"), std::string::npos) << out;
  expect_all_equal(parameter_checksums(out), 2, out);
  expect_no_new_segments(before);
}

}  // namespace
}  // namespace ddpx::elastic_test
