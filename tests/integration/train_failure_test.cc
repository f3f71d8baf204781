// A rank killed mid-training makes the whole job exit non-zero, promptly,
// with a message naming the rank and the signal.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"
#include "tests/sanitizers.h"
#include "tests/testing/rank_processes.h"

namespace ddpx::integration_test {
namespace {

using Clock = std::chrono::steady_clock;

TEST(TrainFailureTest, KilledRankFailsTheJobAndIsNamed) {
  const std::string dir = fresh_dir("killed");
  const std::string metrics = dir + "/metrics.jsonl";
  const std::string log = dir + "/log.txt";
  const pid_t job = fork();
  if (job == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string out = "--metrics_out=" + metrics;
    execl(kTrainBinary, "train", "--nproc=2", "--hidden=64", "--batch_size=16",
          "--epochs=1000", "--log_every=1000", out.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(job, 0);
  // Wait until training is under way (rank 0 has logged steps): loading
  // Fashion-MNIST and the first steps take seconds, several times that in
  // a sanitizer build.
  const auto deadline = Clock::now() + std::chrono::seconds(30) * kSlowdown;
  while (read_file(metrics).find("\"step\":5,") == std::string::npos && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(read_file(metrics).find("\"step\":5,"), std::string::npos) << read_file(log);
  const pid_t victim = rank_processes::find_rank_process(job, 1);
  ASSERT_GT(victim, 0) << "no child of " << job << " with RANK=1";
  ASSERT_EQ(kill(victim, SIGKILL), 0);

  const auto killed_at = Clock::now();
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const std::string output = read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_NE(WEXITSTATUS(status), 0) << output;
  EXPECT_NE(output.find("rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9"),
            std::string::npos) << output;
  EXPECT_LT(seconds, 20.0) << "the job outlived its killed rank";
  // No rank is left behind.
  EXPECT_EQ(rank_processes::find_rank_process(job, 0), -1);
}

}  // namespace
}  // namespace ddpx::integration_test
