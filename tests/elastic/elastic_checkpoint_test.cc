// Checkpoints of an elastic job of examples/train (--elastic
// --checkpoint_dir; docs/elastic.md), with real processes: rank 0 of the
// generation writes them, and when it dies the next rank 0 goes on writing
// into the same folder (its LOCK taken over); a whole-job restart resumes
// from the last one with the parameters an uninterrupted run reaches, bit
// for bit; a job that falls below --min_nproc ends with its last committed
// step checkpointed, also when rank 0 died while writing it.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "examples/trainer/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_checkpoint_checks.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

std::string tmp(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }

// 4 ranks x batch 16 over 1600 images: 25 steps an epoch.
std::vector<std::string> job_args(const std::string& checkpoint_dir, const std::string& epochs) {
  return {"--hidden=32", "--batch_size=16", "--train_limit=1600", "--epochs=" + epochs,
          "--log_every=1000", "--timeout_s=5", "--heartbeat_s=0.5",
          "--checkpoint_dir=" + checkpoint_dir, "--checkpoint_every=5"};
}

// The parameters every rank printed (all equal, `ranks` of them).
std::string common_checksum(const std::string& out, size_t ranks) {
  const std::map<std::string, std::string> sums = parameter_checksums(out);
  expect_all_equal(sums, ranks, out);
  return sums.empty() ? "" : sums.begin()->second;
}

TEST(ElasticCheckpointTest, TheNextLeaderSavesAfterTheLeaderDies) {
  const std::set<std::string> before = shm_segments();
  const std::string dir = tmp("ckpt_leader_dies");
  std::vector<std::string> args = job_args(dir, "1");
  args.push_back("--keep_checkpoints=100");
  std::optional<launcher::ExitStatus> end;
  std::string out;
  {
    // Rank 0 dies right after it committed the checkpoint of step 10.
    KillAt kill("leader_dies", "checkpoint/done:0:10");
    ElasticJob job("leader_dies", 4, args);
    end = job.wait(seconds(300));
    out = job.output();
  }
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << out;
  EXPECT_EQ(end->exit_code, 0) << out;
  EXPECT_NE(out.find("KILL POINT checkpoint/done"), std::string::npos) << out;
  // The new rank 0, another process, took the folder's LOCK over.
  EXPECT_NE(out.find("taking the checkpoint folder over"), std::string::npos) << out;
  const std::string params = common_checksum(out, 3);
  std::optional<LoadedCheckpoint> latest = check_elastic_checkpoints(dir, {32});
  ASSERT_TRUE(latest.has_value());
  const std::vector<int64_t> steps = trainer::complete_checkpoint_steps(dir);
  EXPECT_NE(std::find(steps.begin(), steps.end(), 10), steps.end()) << "the dead leader's";
  EXPECT_GT(latest->step, 10) << "written by the next leader";
  // The epoch's end: the parameters the survivors finished with.
  EXPECT_EQ(latest->parameters_crc32c, params) << out;
  expect_no_new_segments(before);
}

TEST(ElasticCheckpointTest, AWholeJobRestartResumesWithIdenticalParameters) {
  const std::string dir = tmp("ckpt_restart");
  {
    ElasticJob first("restart_first", 4, job_args(dir, "1"));
    std::optional<launcher::ExitStatus> end = first.wait(seconds(300));
    ASSERT_TRUE(end.has_value() && end->exit_code == 0) << first.output();
  }
  std::string resumed_out, straight_out;
  {
    ElasticJob resumed("restart_second", 4, job_args(dir, "2"));
    std::optional<launcher::ExitStatus> end = resumed.wait(seconds(300));
    resumed_out = resumed.output();
    ASSERT_TRUE(end.has_value() && end->exit_code == 0) << resumed_out;
  }
  EXPECT_NE(resumed_out.find("resumed from " + dir + "/step-"), std::string::npos)
      << resumed_out;
  {
    ElasticJob straight("restart_straight", 4, job_args(tmp("ckpt_straight"), "2"));
    std::optional<launcher::ExitStatus> end = straight.wait(seconds(300));
    straight_out = straight.output();
    ASSERT_TRUE(end.has_value() && end->exit_code == 0) << straight_out;
  }
  EXPECT_EQ(common_checksum(resumed_out, 4), common_checksum(straight_out, 4))
      << resumed_out << "\n----\n" << straight_out;
  std::optional<LoadedCheckpoint> latest = check_elastic_checkpoints(dir, {32});
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->parameters_crc32c, common_checksum(resumed_out, 4));
}

TEST(ElasticCheckpointTest, BelowTheMinimumTheJobEndsWithItsLastCheckpoint) {
  const std::set<std::string> before = shm_segments();
  const std::string dir = tmp("ckpt_below_minimum");
  std::vector<std::string> args = job_args(dir, "1");
  args.push_back("--min_nproc=3");
  std::string out;
  std::optional<launcher::ExitStatus> end;
  {
    // Rank 1 dies entering its 7th step's vote: 6 steps committed, the
    // last periodic checkpoint at step 5.
    KillAt kill("below_minimum", "vote/enter:1:7");
    ElasticJob job("below_minimum", 3, args);
    end = job.wait(seconds(300));
    out = job.output();
  }
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << out;
  EXPECT_NE(out.find("below the minimum of 3"), std::string::npos) << out;
  // Both survivors hold the last committed step's parameters, and the
  // checkpoint `latest` names is that state (not step 5's).
  const std::string params = common_checksum(out, 2);
  std::optional<LoadedCheckpoint> latest = check_elastic_checkpoints(dir, {32});
  ASSERT_TRUE(latest.has_value());
  EXPECT_GT(latest->step, 5) << out;
  EXPECT_EQ(latest->parameters_crc32c, params) << out;
  expect_no_new_segments(before);
}

TEST(ElasticCheckpointTest, BelowTheMinimumAfterTheLeaderDiedWritingTheLastOne) {
  const std::set<std::string> before = shm_segments();
  const std::string dir = tmp("ckpt_leader_died_writing");
  std::vector<std::string> args = job_args(dir, "1");
  args.push_back("--min_nproc=3");
  std::string out;
  std::optional<launcher::ExitStatus> end;
  {
    // Rank 0 dies with step 5's checkpoint, the first, half written; the
    // two left are below the minimum and one of them writes it.
    KillAt kill("leader_died_writing", "checkpoint/state/tmp_half:0:5");
    ElasticJob job("leader_died_writing", 3, args);
    end = job.wait(seconds(300));
    out = job.output();
  }
  ASSERT_TRUE(end.has_value()) << "the job hung:\n" << out;
  EXPECT_NE(out.find("KILL POINT checkpoint/state/tmp_half"), std::string::npos) << out;
  EXPECT_NE(out.find("below the minimum of 3"), std::string::npos) << out;
  const std::string params = common_checksum(out, 2);
  std::optional<LoadedCheckpoint> latest = check_elastic_checkpoints(dir, {32});
  ASSERT_TRUE(latest.has_value()) << out;
  EXPECT_EQ(latest->step, 5) << out;
  EXPECT_EQ(latest->parameters_crc32c, params) << out;
  expect_no_new_segments(before);
}

}  // namespace
}  // namespace ddpx::elastic_test
