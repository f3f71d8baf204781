// kill -9 of ranks of a 4-rank elastic job of examples/train at 20 chosen
// instants spread over a step and over the rebuild after an earlier kill:
// each victim kills itself at a named kill point (elastic/kill_point.h;
// the hook's are examples/train's --inject_fault=kill_points), so the kill
// lands exactly there. Every run ends (no hang), the survivors finish the
// epoch with bit-identical parameters, and no /dev/shm segment is left.
//
// The instants, each with rank 0 among the victims somewhere:
//   hook/run      before a bucket's allreduce is issued
//   hook/issued   while the bucket's allreduce is in flight
//   hook/done     once it completed on the victim (the others may still be in it)
//   vote/enter    gradients synchronized, before the step's vote
//   vote/cast     voted, waiting for the decision
//   vote/decided  the step committed: the victim dies entering its optimizer step
//   form/leading  the leader of the next generation, while it seals it
//   form/member   a member that read the next generation's record, before connecting
//   form/connected  a member whose next group connected, before its first op
//   state/sized   rank 0 between the two broadcasts of the state to a replacement
// and a replacement (--max_restarts=1) killed in flight once admitted (its
// 12th pass: the first rank 3 is rank 2 after the first kill).
// A "rebuild" case kills a second rank in the generation formed after the
// first kill (its form/* point at generation 1).
// The checkpoint cases (--checkpoint_dir, every 5 steps) kill rank 0, the
// writer, inside its write of step 10's or 15's checkpoint (checkpoint/*,
// examples/trainer/checkpoint_fault.h): on entering it, with its file half
// written, written and synced but not renamed, before the MANIFEST's
// rename, before `latest`'s. The next rank 0 goes on checkpointing into the
// folder; at the end every step folder is a complete checkpoint that loads
// (the dead writer's partial one was never used, and was removed), and
// `latest` holds the survivors' parameters.
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_checkpoint_checks.h"
#include "tests/elastic/elastic_job.h"
#include "tests/elastic/job_checks.h"

namespace ddpx::elastic_test {
namespace {

using std::chrono::seconds;

struct Instant {
  const char* name;
  const char* kill_at;  // DDPX_KILL_AT
  int victims;          // ranks it kills
  int replacements;     // --max_restarts
  bool checkpoints = false;  // --checkpoint_dir, checked at the end
};

// A replacement starts in a second or two (more under a sanitizer): runs
// that wait for one train 20 epochs (about 600 steps) so it is admitted
// well before the end; the others one epoch of 25 steps.
std::string epochs(const Instant& at) { return at.replacements > 0 ? "20" : "1"; }

const Instant kInstants[] = {
    {"BeforeAllreduceRank1", "hook/run:1:9", 1, 0},
    {"BeforeAllreduceRank0", "hook/run:0:10", 1, 0},
    {"AllreduceInFlightRank2", "hook/issued:2:9", 1, 0},
    {"AllreduceInFlightRank0", "hook/issued:0:11", 1, 0},
    {"AllreduceInFlightRank3", "hook/issued:3:12", 1, 0},
    {"AfterAllreduceRank1", "hook/done:1:10", 1, 0},
    {"AfterAllreduceRank0", "hook/done:0:12", 1, 0},
    {"BeforeVoteRank3", "vote/enter:3:6", 1, 0},
    {"BeforeVoteRank0", "vote/enter:0:7", 1, 0},
    {"VotedRank1", "vote/cast:1:6", 1, 0},
    {"VotedRank0", "vote/cast:0:8", 1, 0},
    {"OptimizerStepRank2", "vote/decided:2:7", 1, 0},
    {"OptimizerStepRank0", "vote/decided:0:6", 1, 0},
    {"RebuildLeader", "hook/issued:1:9,form/leading:*:1", 2, 0},
    {"RebuildMemberRank0", "hook/issued:2:9,form/member:0:1", 2, 0},
    {"RebuildMemberRank2", "hook/run:0:9,form/member:2:1", 2, 0},
    {"RebuildConnectedRank1", "vote/cast:3:6,form/connected:1:1", 2, 0},
    {"RebuildConnectedRank0", "hook/done:2:9,form/connected:0:1", 2, 0},
    {"ReplacementKilledInFlight", "hook/issued:1:9,hook/issued:3:12", 2, 1},
    {"StateTransferRank0", "hook/issued:2:9,state/sized:0:1", 2, 1},
    {"CheckpointWriteBeginRank0", "checkpoint/begin:0:10", 1, 0, true},
    {"CheckpointHalfWrittenRank0", "checkpoint/state/tmp_half:0:10", 1, 0, true},
    {"CheckpointBeforeRenameRank0", "checkpoint/state/tmp_synced:0:15", 1, 0, true},
    {"CheckpointBeforeManifestRank0", "checkpoint/manifest/tmp_synced:0:10", 1, 0, true},
    {"CheckpointBeforeLatestRank0", "checkpoint/latest/tmp_synced:0:10", 1, 0, true},
};

class KillMatrixTest : public ::testing::TestWithParam<Instant> {};

TEST_P(KillMatrixTest, TheSurvivorsFinish) {
  const Instant& at = GetParam();
  const std::set<std::string> before = shm_segments();
  const KillAt kill(at.name, at.kill_at);
  std::vector<std::string> args = {
      "--hidden=32", "--batch_size=16", "--train_limit=1600", "--epochs=" + epochs(at),
      "--log_every=1000", "--timeout_s=5", "--heartbeat_s=0.5",
      "--inject_fault=kill_points", "--bucket_cap_mb=0.03", "--first_bucket_cap_mb=0.03",
      "--max_restarts=" + std::to_string(at.replacements)};
  const std::string checkpoint_dir =
      std::string(getenv("TEST_TMPDIR")) + "/checkpoints_" + at.name;
  if (at.checkpoints) {
    // Every complete checkpoint stays, to be checked.
    for (const std::string& a : {"--checkpoint_dir=" + checkpoint_dir,
                                 std::string("--checkpoint_every=5"),
                                 std::string("--keep_checkpoints=1000")})
      args.push_back(a);
  }
  ElasticJob job(std::string("kill_") + at.name, 4, args);
  std::optional<launcher::ExitStatus> end = job.wait(seconds(300));
  const std::string out = job.output();
  ASSERT_TRUE(end.has_value()) << "the job hung (DDPX_KILL_AT=" << at.kill_at << "):\n" << out;
  EXPECT_EQ(end->exit_code, 0) << out;
  // Each kill landed where it was meant to.
  size_t kills = 0;
  for (size_t p = out.find("KILL POINT"); p != std::string::npos;
       p = out.find("KILL POINT", p + 1)) {
    ++kills;
  }
  EXPECT_EQ(kills, static_cast<size_t>(at.victims)) << out;
  EXPECT_NE(out.find("done:"), std::string::npos) << out;
  // The launcher goes on past a rank that ended badly: a sanitizer's report
  // in any rank is found in the output instead.
  EXPECT_EQ(out.find("Sanitizer"), std::string::npos) << out;
  const std::vector<std::string> changes = job.metrics_lines("membership");
  ASSERT_GE(changes.size(), 1u) << out;
  const size_t live = 4 - at.victims + at.replacements;
  EXPECT_EQ(json_field(changes.back(), "world_size"), std::to_string(live)) << changes.back();
  const std::map<std::string, std::string> sums = parameter_checksums(out);
  expect_all_equal(sums, live, out);
  if (at.checkpoints) {
    std::optional<LoadedCheckpoint> latest = check_elastic_checkpoints(checkpoint_dir, {32});
    ASSERT_TRUE(latest.has_value()) << out;
    ASSERT_FALSE(sums.empty());
    EXPECT_EQ(latest->parameters_crc32c, sums.begin()->second) << out;
  }
  expect_no_new_segments(before);
}

INSTANTIATE_TEST_SUITE_P(Instants, KillMatrixTest, ::testing::ValuesIn(kInstants),
                         [](const ::testing::TestParamInfo<Instant>& i) { return i.param.name; });

}  // namespace
}  // namespace ddpx::elastic_test
