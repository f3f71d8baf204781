// Elastic training with real processes: examples/train --elastic with 4
// ranks on one host (shared memory between them), the launcher serving the
// store. A rank killed with kill -9 (rank 0 too) or replaced: the job ends
// with the survivors, hangs nowhere, leaves no shared-memory segment, and
// its ranks end with bit-identical parameters. A stopped rank:
// stopped_rank_abort_test.cc; kills at named points: kill_matrix_test.cc.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

// A small model and few steps: each run takes a few seconds.
std::vector<std::string> small_run(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--hidden=32",   "--batch_size=16",  "--train_limit=6400",
                                   "--epochs=1",    "--log_every=1000", "--timeout_s=3",
                                   "--heartbeat_s=0.5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The run every kill case shares: waits until rank 0 reported step
// `at_step`, SIGKILLs the ranks the launcher started in `slots` (in order,
// `between` apart), and waits for the job to end. nullopt, with the reason
// added as a failure, when the job never got there, a rank was not found,
// or the job hung after the kills.
std::optional<launcher::ExitStatus> kill_ranks_and_wait(
    ElasticJob& job, int64_t at_step, const std::vector<int>& slots,
    std::chrono::milliseconds between = std::chrono::milliseconds(0)) {
  if (!job.wait_for_step(at_step, seconds(60))) {
    ADD_FAILURE() << "the job did not reach step " << at_step << ":\n" << job.output();
    return std::nullopt;
  }
  std::vector<pid_t> victims;
  for (int slot : slots) {
    victims.push_back(job.rank_pid(slot));
    if (victims.back() <= 0) {
      ADD_FAILURE() << "no live rank in slot " << slot << ":\n" << job.output();
      return std::nullopt;
    }
  }
  for (size_t i = 0; i < victims.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(between);
    if (kill(victims[i], SIGKILL) != 0) {
      ADD_FAILURE() << "kill(" << victims[i] << ", SIGKILL) failed";
      return std::nullopt;
    }
  }
  std::optional<launcher::ExitStatus> end = job.wait(seconds(90));
  if (!end.has_value()) ADD_FAILURE() << "the job hung after the kills:\n" << job.output();
  return end;
}

void kill_one_of_four(int slot) {
  const std::set<std::string> before = shm_segments();
  ElasticJob job("kill" + std::to_string(slot), 4, small_run());
  std::optional<launcher::ExitStatus> end = kill_ranks_and_wait(job, 10, {slot});
  ASSERT_TRUE(end.has_value());
  const std::string out = job.output();
  EXPECT_EQ(end->exit_code, 0) << out;
  const std::vector<std::string> changes = job.metrics_lines("membership");
  ASSERT_GE(changes.size(), 1u) << out;
  EXPECT_EQ(json_field(changes[0], "world_size"), "3") << changes[0];
  EXPECT_NE(json_field(changes[0], "left"), "") << changes[0];
  EXPECT_EQ(json_field(changes[0], "steps_lost"), "1") << changes[0];
  EXPECT_LT(std::stod(json_field(changes[0], "recovery_s")), 10.0) << changes[0];
  EXPECT_NE(out.find("done:"), std::string::npos) << out;
  // 6400 samples, 64 per step with 4 ranks: every sample once, the rest of
  // the epoch on 3 ranks (48 per step): more steps than 100, fewer than 134.
  const std::vector<std::string> epochs = job.metrics_lines("epoch");
  ASSERT_EQ(epochs.size(), 1u) << out;
  const int64_t steps = std::stoll(json_field(epochs[0], "step"));
  EXPECT_GT(steps, 100) << epochs[0];
  EXPECT_LT(steps, 134) << epochs[0];
  expect_all_equal(parameter_checksums(out), 3, out);
  expect_no_new_segments(before);
}

TEST(ElasticTrainTest, KillOneRankTheOthersFinish) { kill_one_of_four(2); }

TEST(ElasticTrainTest, KillRankZeroTheOthersFinish) { kill_one_of_four(0); }

// Two of four killed, at once or the second `between` after the first: the
// job ends on the other two, in one membership change or in two.
void kill_two_of_four(const std::string& name, std::vector<int> slots,
                      std::chrono::milliseconds between) {
  const std::set<std::string> before = shm_segments();
  ElasticJob job(name, 4, small_run());
  std::optional<launcher::ExitStatus> end = kill_ranks_and_wait(job, 10, slots, between);
  ASSERT_TRUE(end.has_value());
  const std::string out = job.output();
  EXPECT_EQ(end->exit_code, 0) << out;
  const std::vector<std::string> changes = job.metrics_lines("membership");
  ASSERT_GE(changes.size(), 1u) << out;
  ASSERT_LE(changes.size(), 2u) << out;
  EXPECT_EQ(json_field(changes.back(), "world_size"), "2") << changes.back();
  expect_all_equal(parameter_checksums(out), 2, out);
  expect_no_new_segments(before);
}

TEST(ElasticTrainTest, TwoRanksKilledAtOnce) {
  kill_two_of_four("kill_two", {1, 3}, std::chrono::milliseconds(0));
}

// The second kill lands while the survivors of the first may still be
// forming the next generation (or just after): either way the job ends on
// the two that are left.
TEST(ElasticTrainTest, KillDuringTheRebuildAfterAnEarlierKill) {
  kill_two_of_four("kill_in_rebuild", {2, 0}, std::chrono::milliseconds(100));
}

TEST(ElasticTrainTest, BelowMinNprocEndsCleanly) {
  const std::set<std::string> before = shm_segments();
  ElasticJob job("below_min", 2, small_run({"--min_nproc=2"}));
  std::optional<launcher::ExitStatus> end = kill_ranks_and_wait(job, 5, {1});
  ASSERT_TRUE(end.has_value());
  const std::string out = job.output();
  EXPECT_NE(end->exit_code, 0) << out;
  EXPECT_NE(out.find("below the minimum of 2: ending the job"), std::string::npos) << out;
  expect_no_new_segments(before);
}

TEST(ElasticTrainTest, ReplacementJoinsWithTheSameParameters) {
  ElasticJob job("replace", 4, small_run({"--max_restarts=1", "--epochs=10"}));
  std::optional<launcher::ExitStatus> end = kill_ranks_and_wait(job, 10, {1});
  ASSERT_TRUE(end.has_value());
  const std::string out = job.output();
  EXPECT_EQ(end->exit_code, 0) << out;
  EXPECT_NE(out.find("starting a replacement (restart 1 of 1)"), std::string::npos) << out;
  bool joined = false;
  for (const std::string& line : job.metrics_lines("membership")) {
    if (!json_field(line, "joined").empty() && json_field(line, "world_size") == "4") joined = true;
  }
  EXPECT_TRUE(joined) << out;
  expect_all_equal(parameter_checksums(out), 4, out);
}

}  // namespace
}  // namespace ddpx::elastic_test
