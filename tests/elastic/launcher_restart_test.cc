// The launcher's --max_restarts with real processes (examples/train
// --elastic --nproc=3, the launcher serving the store): a killed rank is
// restarted as a replacement that the job admits, after which every rank's
// parameters are bit-identical; once the restarts are spent, a further kill
// is not restarted, and the job goes on with fewer ranks while they are at
// least --min_nproc, or ends with the message below it.
#include <signal.h>

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

// Four epochs of 100 steps (4800 samples, 3 ranks x 16 a step; more steps
// on fewer ranks): long enough for two kills and a replacement's admission.
std::vector<std::string> restart_run(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--hidden=32",      "--batch_size=16", "--train_limit=4800",
                                   "--epochs=4",       "--log_every=1000", "--timeout_s=3",
                                   "--heartbeat_s=0.5", "--max_restarts=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Polls until a membership line has `world_size` ranks and a joiner.
bool wait_for_admission(const ElasticJob& job, int world_size, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    for (const std::string& line : job.metrics_lines("membership")) {
      if (!json_field(line, "joined").empty() &&
          json_field(line, "world_size") == std::to_string(world_size)) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void kill_slots(const ElasticJob& job, const std::vector<int>& slots) {
  std::vector<pid_t> victims;
  for (int slot : slots) {
    victims.push_back(job.rank_pid(slot));
    ASSERT_GT(victims.back(), 0) << "no live rank in slot " << slot << ":\n" << job.output();
  }
  for (pid_t pid : victims) ASSERT_EQ(kill(pid, SIGKILL), 0) << "kill(" << pid << ")";
}

// The first kill of slot 1 at step 10: the launcher restarts it (its one
// restart) and the job admits the replacement, back to 3 ranks.
void kill_and_see_the_replacement_admitted(ElasticJob& job) {
  ASSERT_TRUE(job.wait_for_step(10, seconds(60))) << job.output();
  kill_slots(job, {1});
  ASSERT_TRUE(job.wait_for_output("starting a replacement (restart 1 of 1)", seconds(30)))
      << job.output();
  ASSERT_TRUE(wait_for_admission(job, 3, seconds(60))) << job.output();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LauncherRestartTest, AfterTheLastRestartAKillIsNotRestartedAndTheJobGoesOn) {
  const std::set<std::string> before = shm_segments();
  ElasticJob job("restarts_spent", 3, restart_run({"--min_nproc=2"}));
  kill_and_see_the_replacement_admitted(job);
  if (HasFatalFailure()) return;
  // Slot 2 still runs its first process; slot 1 runs the replacement,
  // which then finishes beside rank 0.
  kill_slots(job, {2});
  if (HasFatalFailure()) return;
  std::optional<launcher::ExitStatus> end = job.wait(seconds(120));
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << job.output();
  const std::string out = job.output();
  EXPECT_EQ(end->exit_code, 0) << out;
  EXPECT_EQ(count(out, "starting a replacement"), 1u) << out;
  EXPECT_NE(out.find("the job goes on without it"), std::string::npos) << out;
  const std::vector<std::string> changes = job.metrics_lines("membership");
  ASSERT_GE(changes.size(), 3u) << out;  // 2 ranks, 3 with the replacement, 2
  EXPECT_EQ(json_field(changes.back(), "world_size"), "2") << changes.back();
  EXPECT_NE(out.find("done:"), std::string::npos) << out;
  // Rank 0 and the replacement, bit for bit.
  expect_all_equal(parameter_checksums(out), 2, out);
  expect_no_new_segments(before);
}

TEST(LauncherRestartTest, AfterTheLastRestartTwoKillsBelowMinNprocEndTheJob) {
  const std::set<std::string> before = shm_segments();
  ElasticJob job("restarts_spent_below_min", 3, restart_run({"--min_nproc=2"}));
  kill_and_see_the_replacement_admitted(job);
  if (HasFatalFailure()) return;
  kill_slots(job, {1, 2});
  if (HasFatalFailure()) return;
  std::optional<launcher::ExitStatus> end = job.wait(seconds(120));
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << job.output();
  const std::string out = job.output();
  EXPECT_NE(end->exit_code, 0) << out;
  EXPECT_EQ(count(out, "starting a replacement"), 1u) << out;
  // The two killed, then rank 0 ending below the minimum: none restarted.
  EXPECT_GE(count(out, "the job goes on without it"), 2u) << out;
  EXPECT_NE(out.find("below the minimum of 2: ending the job"), std::string::npos) << out;
  EXPECT_EQ(out.find("done:"), std::string::npos) << out;
  expect_no_new_segments(before);
}

}  // namespace
}  // namespace ddpx::elastic_test
