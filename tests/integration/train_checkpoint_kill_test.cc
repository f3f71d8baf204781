// kill -9 of the whole job at precise instants while it writes a checkpoint
// (examples/trainer/checkpoint_fault.h stops one rank there; the test then
// SIGKILLs the launcher and every rank at once). After each crash the
// resume must continue from the last complete checkpoint and end bit for bit
// where an uninterrupted run ends: model, optimizer, hook state, every
// logged loss and the epoch's train_loss. Never mixed state.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// 80 images / 2 ranks / batch 8 = 5 steps per epoch. Checkpoints at steps
// 2, 4, 5 (end of epoch 1), 6 and 8 (--max_steps); with the default
// --keep_checkpoints=2 committing step 6 removes step 4's folder.
constexpr int kCrashStep = 6;
constexpr int kPreviousComplete = 5;

std::string common_flags(const std::string& hook) {
  return std::string(kTrainBinary) +
         " --nproc=2 --hidden=16 --batch_size=8 --train_limit=80 --epochs=2 --max_steps=8"
         " --checkpoint_every=2 --log_every=1000 --timeout_s=60 --hook='" + hook + "'";
}

// Starts the job stopped at the point, then kills it whole with SIGKILL.
// False if the job ended before reaching the point.
bool run_and_kill_at(const std::string& command, const std::string& stop_at,
                     const std::string& marker, std::string* log) {
  const pid_t pid = start_stopped_at(command, stop_at, marker, *log);
  if (pid > 0) kill_job(pid);
  *log = read_file(*log);
  return pid > 0;
}

// state.bin without its wall_seconds field (bytes 52..59 of the header).
std::string state_without_wall_time(const std::string& path) {
  std::string s = read_file(path);
  EXPECT_GT(s.size(), 60u) << path;
  return s.size() > 60 ? s.substr(0, 52) + s.substr(60) : s;
}

struct Instant {
  int rank;
  const char* point;
};

void expect_crash_then_resume_matches(const std::string& name, const std::string& hook,
                                      const std::vector<Instant>& instants) {
  const std::string root = fresh_dir(name);
  const std::string common = common_flags(hook);
  RunResult whole = run_command(common + " --checkpoint_dir=" + root + "/whole --metrics_out=" +
                                root + "/whole.jsonl");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::vector<MetricsLine> whole_metrics = read_metrics(root + "/whole.jsonl");
  const std::vector<MetricsLine> whole_steps = lines_of_type(whole_metrics, "step");
  ASSERT_EQ(whole_steps.size(), 8u);
  const std::string whole_final = root + "/whole/step-00000008";

  for (const Instant& at : instants) {
    const std::string label = std::string("rank ") + std::to_string(at.rank) + " at " + at.point;
    SCOPED_TRACE(label);
    const std::string dir = fresh_dir(name + "_" + std::to_string(at.rank) + "_" +
                                      [&] {
                                        std::string p = at.point;
                                        for (char& c : p)
                                          if (c == '/') c = '_';
                                        return p;
                                      }());
    const std::string marker = dir + "/stopped";
    std::string log = dir + "/killed.log";
    const std::string stop_at = std::to_string(kCrashStep) + ":" + std::to_string(at.rank) + ":" +
                                at.point + ":" + marker;
    ASSERT_TRUE(run_and_kill_at(common + " --checkpoint_dir=" + dir + "/ckpt", stop_at, marker,
                                &log))
        << "never reached the point:\n" << log;

    RunResult resumed = run_command(common + " --checkpoint_dir=" + dir + "/ckpt --metrics_out=" +
                                    dir + "/resumed.jsonl");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    // The manifest's rename commits the folder; `latest` moves after it.
    // Until `latest` names step 6 the resume takes step 5.
    const std::string p = at.point;
    const bool latest_moved =
        at.rank == 0 && (p == "latest/renamed" || p == "pruning" || p == "done");
    const int from = latest_moved ? kCrashStep : kPreviousComplete;
    char expected[64];
    snprintf(expected, sizeof(expected), "resumed from %s/ckpt/step-%08d:", dir.c_str(), from);
    ASSERT_NE(resumed.output.find(expected), std::string::npos)
        << "expected '" << expected << "' in:\n" << resumed.output;

    const std::vector<MetricsLine> metrics = read_metrics(dir + "/resumed.jsonl");
    const std::vector<MetricsLine> steps = lines_of_type(metrics, "step");
    ASSERT_EQ(steps.size(), static_cast<size_t>(8 - from));
    for (const MetricsLine& s : steps) {
      const int step = static_cast<int>(number(s, "step"));
      ASSERT_GE(step, 1);
      EXPECT_EQ(s.at("loss"), whole_steps[step - 1].at("loss")) << "step " << step;
    }
    // Epoch 2 stopped at step 8: its train_loss covers steps 6-8 whether or
    // not step 6 ran before the crash.
    const std::vector<MetricsLine> epochs = lines_of_type(metrics, "epoch");
    ASSERT_FALSE(epochs.empty());
    EXPECT_EQ(epochs.back().at("train_loss"),
              lines_of_type(whole_metrics, "epoch").back().at("train_loss"));
    const std::string final_dir = dir + "/ckpt/step-00000008";
    EXPECT_TRUE(state_without_wall_time(whole_final + "/state.bin") ==
                state_without_wall_time(final_dir + "/state.bin"))
        << "model/optimizer differ";
    for (const char* f : {"/hook_rank0.bin", "/hook_rank1.bin"})
      EXPECT_TRUE(read_file(whole_final + f) == read_file(final_dir + f)) << f;
  }
}

// Rank 0's instants: before the folder is ready, halfway through and after
// each of its files, during the agreement, while the MANIFEST and `latest`
// are written, while old checkpoints are removed, after the end.
const std::vector<Instant> kRank0Instants = {
    {0, "begin"},           {0, "dir_ready"},        {0, "state/tmp_half"},
    {0, "state/tmp_synced"}, {0, "state/renamed"},   {0, "hook/tmp_half"},
    {0, "hook/renamed"},     {0, "files_done"},      {0, "agreed"},
    {0, "manifest/tmp_half"}, {0, "manifest/renamed"}, {0, "latest/tmp_written"},
    {0, "latest/renamed"},   {0, "pruning"},         {0, "done"},
};
// Rank 1 between the two ranks' files: rank 0's are on disk, rank 1's not.
const std::vector<Instant> kRank1Instants = {
    {1, "hook/tmp_half"}, {1, "hook/renamed"}, {1, "files_done"}};

TEST(TrainCheckpointKillTest, PowerSgdResumesBitIdenticallyAfterKillAt18Instants) {
  std::vector<Instant> all = kRank0Instants;
  all.insert(all.end(), kRank1Instants.begin(), kRank1Instants.end());
  expect_crash_then_resume_matches("kill_powersgd", "powersgd:rank=1,start_iter=2", all);
}

TEST(TrainCheckpointKillTest, AllreduceResumesBitIdenticallyAfterKillAt8Instants) {
  expect_crash_then_resume_matches(
      "kill_allreduce", "allreduce",
      {{0, "dir_ready"}, {0, "state/tmp_half"}, {0, "state/renamed"}, {1, "hook/tmp_half"},
       {0, "files_done"}, {0, "manifest/tmp_half"}, {0, "latest/renamed"}, {0, "pruning"}});
}

}  // namespace
}  // namespace ddpx::integration_test
