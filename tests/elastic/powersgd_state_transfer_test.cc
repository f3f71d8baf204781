// An elastic job of examples/train with PowerSGD
// (--hook=powersgd:rank=2,start_iter=2) where a rank is killed and a
// replacement admitted: every rank ends with the same parameters, the same
// hook iteration, the job's step count (a step discarded midway left no
// trace in any rank's hook state; the replacement took rank 0's), and the
// same shared hook state (iteration, warm-start P/Q, generator: the
// checksum examples/train prints without the rank's own error feedback,
// which stems from its own gradients and differs by rank).

#include <chrono>
#include <map>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

TEST(PowerSGDStateTransferTest, AReplacementEndsWithTheSameHookStateAsEveryRank) {
  const std::set<std::string> before = shm_segments();
  // Rank 2 dies entering its 10th step's vote (PowerSGD compresses from
  // the 3rd step on), after its gradients went through the hook.
  const KillAt kill("powersgd_replacement", "vote/enter:2:10");
  // 20 epochs of 25 steps: the replacement is admitted well before the end,
  // under a sanitizer too.
  ElasticJob job("powersgd_replacement", 4,
                 {"--hidden=32", "--batch_size=16", "--train_limit=1600", "--epochs=20",
                  "--log_every=1000", "--timeout_s=5", "--heartbeat_s=0.5",
                  "--hook=powersgd:rank=2,start_iter=2", "--max_restarts=1"});
  std::optional<launcher::ExitStatus> end = job.wait(seconds(300));
  const std::string out = job.output();
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << out;
  EXPECT_EQ(end->exit_code, 0) << out;
  EXPECT_NE(out.find("KILL POINT vote/enter"), std::string::npos) << out;
  EXPECT_EQ(out.find("Sanitizer"), std::string::npos) << out;
  bool admitted = false;
  for (const std::string& line : job.metrics_lines("membership"))
    admitted |= !json_field(line, "joined").empty();
  EXPECT_TRUE(admitted) << out;
  expect_all_equal(parameter_checksums(out), 4, out);

  std::smatch done;
  ASSERT_TRUE(std::regex_search(out, done, std::regex("done: (\\d+) steps"))) << out;
  std::map<std::string, std::pair<std::string, std::string>> hooks;  // member -> (iter, crc)
  std::regex line("member (\\d+) rank \\d+: hook iteration (\\d+), shared state crc32c (0x[0-9a-f]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    hooks[(*it)[1]] = {(*it)[2], (*it)[3]};
  }
  ASSERT_EQ(hooks.size(), 4u) << out;
  for (const auto& [member, hook] : hooks) {
    EXPECT_EQ(hook.first, done[1].str()) << "member " << member << "'s hook iteration\n" << out;
    EXPECT_EQ(hook.second, hooks.begin()->second.second) << "member " << member << "\n" << out;
  }
  expect_no_new_segments(before);
}

}  // namespace
}  // namespace ddpx::elastic_test
