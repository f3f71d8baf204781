// A rank stopped (SIGSTOP) while the others wait for it inside a collective,
// with a long op timeout (60 s): the heartbeat's verdict aborts the
// generation's ops in flight (ElasticGroup -> Backend::abort), so the
// survivors fail at once, naming the silent rank, and re-form without it
// within a few seconds, on the shared-memory path and on TCP alike.
// Without the abort they would wait out the 60 s timeout.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

constexpr double kOpTimeoutS = 60;

void stop_one_of_four(const std::string& name) {
  ElasticJob job(name, 4,
                 {"--hidden=32", "--batch_size=16", "--train_limit=6400", "--epochs=1",
                  "--log_every=1000", "--timeout_s=60", "--heartbeat_s=0.5"});
  ASSERT_TRUE(job.wait_for_step(10, seconds(60))) << job.output();
  const pid_t victim = job.rank_pid(2);
  ASSERT_GT(victim, 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  // The survivors block in the next step's allreduce (or its vote) on the
  // stopped rank.
  const bool dropped = job.wait_for_output("membership: generation 1, 3 ranks", seconds(45));
  const double recover_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  kill(victim, SIGCONT);
  ASSERT_TRUE(dropped) << "the survivors did not re-form well before the op timeout:\n"
                       << job.output();
  // A silent heartbeat counts after 4 x 0.5 s; the rest is the new
  // generation forming on a loaded machine. Far below the 60 s op timeout.
  EXPECT_LT(recover_s, kOpTimeoutS / 4) << job.output();
  std::optional<launcher::ExitStatus> end = job.wait(seconds(90));
  const std::string out = job.output();
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << out;
  EXPECT_EQ(end->exit_code, 0) << out;
  // After SIGCONT the stopped rank finds itself left out and is refused.
  EXPECT_NE(out.find("it is refused rather than merged"), std::string::npos) << out;
  expect_all_equal(parameter_checksums(out), 3, out);
}

TEST(StoppedRankAbortTest, SharedMemoryOpsAbortedByTheHeartbeat) {
  stop_one_of_four("abort_shm");
}

TEST(StoppedRankAbortTest, TcpOpsAbortedByTheHeartbeat) {
  // The children inherit it: every generation's group stays on TCP pairs.
  setenv("DDPX_SHM", "0", 1);
  stop_one_of_four("abort_tcp");
  unsetenv("DDPX_SHM");
}

}  // namespace
}  // namespace ddpx::elastic_test
