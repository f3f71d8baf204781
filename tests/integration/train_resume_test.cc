// Checkpoint, stop, resume: the resumed run ends with exactly the model,
// optimizer and hook state of a run that never stopped, and logs the same
// losses after the resume point.
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// state.bin without its header's wall-clock time (bytes 52..59, see
// examples/trainer/checkpoint_format.h): progress, model and optimizer.
std::string state_without_wall_time(const std::string& path) {
  const std::string s = read_file(path);
  EXPECT_GT(s.size(), 60u) << path;
  return s.size() > 60 ? s.substr(0, 52) + s.substr(60) : s;
}

void expect_resume_matches(const std::string& name, const std::string& hook) {
  const std::string dir = fresh_dir(name);
  // 1000 images / 2 ranks / batch 16 = 32 steps per epoch: the stop at step
  // 45 is mid-epoch 2 and the end (70) is in epoch 3.
  const std::string common = std::string(kTrainBinary) +
                             " --nproc=2 --hidden=96,64 --batch_size=16 --train_limit=1000"
                             " --epochs=5 --weight_decay=1e-4 --log_every=1000 --hook='" +
                             hook + "'";
  // Same losses, step by step, including those after the resume.
  ASSERT_NO_FATAL_FAILURE(expect_resume_matches_whole_run(common, dir, 45, 70));
  // Epoch 2 was interrupted at step 45: its train_loss still averages all of
  // its steps (33-64), as in the uninterrupted run.
  std::vector<MetricsLine> ea = lines_of_type(read_metrics(dir + "/whole.jsonl"), "epoch");
  std::vector<MetricsLine> eb = lines_of_type(read_metrics(dir + "/split.jsonl"), "epoch");
  ASSERT_GE(ea.size(), 2u);
  ASSERT_EQ(eb.size(), ea.size() + 1);  // plus the "stopped at --max_steps" line of the split
  EXPECT_EQ(ea[1]["train_loss"], eb[2]["train_loss"]);
  EXPECT_EQ(ea[1]["test_acc"], eb[2]["test_acc"]);
  // Same parameters and momentum, bit for bit, and the same hook state.
  const std::string whole_state = state_without_wall_time(dir + "/whole/step-00000070/state.bin");
  EXPECT_GT(whole_state.size(), 4u * 96 * 784);
  EXPECT_TRUE(whole_state == state_without_wall_time(dir + "/split/step-00000070/state.bin"))
      << "model/optimizer differ after resume";
  for (const char* f : {"/hook_rank0.bin", "/hook_rank1.bin"}) {
    EXPECT_TRUE(read_file(dir + "/whole/step-00000070" + f) ==
                read_file(dir + "/split/step-00000070" + f))
        << f;
  }
}

TEST(TrainResumeTest, AllreduceResumeEqualsUninterruptedRun) {
  expect_resume_matches("resume_allreduce", "allreduce");
}

TEST(TrainResumeTest, PowerSgdWithErrorFeedbackResumeEqualsUninterruptedRun) {
  // Error feedback and warm-start Qs live in the hook state: a resume that
  // dropped them would train differently from step 46 on.
  expect_resume_matches("resume_powersgd", "powersgd:rank=2,start_iter=10");
}

TEST(TrainResumeTest, CheckpointOfAnotherModelIsRejectedByName) {
  const std::string dir = fresh_dir("resume_mismatch");
  const std::string base = std::string(kTrainBinary) +
                           " --nproc=2 --batch_size=16 --train_limit=200 --max_steps=3"
                           " --checkpoint_dir=" + dir;
  ASSERT_EQ(run_command(base + " --hidden=32").exit_code, 0);
  RunResult r = run_command(base + " --hidden=48");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("fc0.weight"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("state.bin"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddpx::integration_test

namespace ddpx::integration_test {
namespace {

const std::string kSmall = std::string(kTrainBinary) +
                           " --nproc=2 --hidden=16 --batch_size=8 --train_limit=80 --epochs=2"
                           " --log_every=1000 --timeout_s=60";

// Issue 19 point 9: the hook state belongs to the hook that wrote it.
TEST(TrainResumeTest, AnotherHookIsRefusedUnlessTheHookStateIsReset) {
  const std::string dir = fresh_dir("resume_hook_change");
  ASSERT_EQ(run_command(kSmall + " --max_steps=4 --hook=powersgd:rank=1,start_iter=2"
                        " --checkpoint_dir=" + dir).exit_code, 0);
  RunResult r = run_command(kSmall + " --max_steps=6 --hook=allreduce --checkpoint_dir=" + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("step-00000004/hook_rank0.bin: field hook = "
                          "'powersgd:rank=1,start_iter=2', but this run has --hook='allreduce'; "
                          "pass --reset_hook_state"),
            std::string::npos)
      << r.output;
  // The same options in another order are the same hook.
  r = run_command(kSmall + " --max_steps=5 --hook=powersgd:start_iter=2,rank=1 --checkpoint_dir=" +
                  dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(kSmall + " --max_steps=6 --hook=allreduce --reset_hook_state --checkpoint_dir=" +
                  dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(hook state reset: --reset_hook_state)"), std::string::npos)
      << r.output;
  // And back: PowerSGD from the allreduce checkpoint needs the flag too,
  // then counts its iterations from the step it started at.
  r = run_command(kSmall + " --max_steps=7 --hook=powersgd:rank=1,start_iter=2 --checkpoint_dir=" +
                  dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("field hook = 'allreduce'"), std::string::npos) << r.output;
  ASSERT_EQ(run_command(kSmall + " --max_steps=8 --reset_hook_state"
                        " --hook=powersgd:rank=1,start_iter=2 --checkpoint_dir=" + dir)
                .exit_code,
            0);
  r = run_command(kSmall + " --max_steps=9 --hook=powersgd:rank=1,start_iter=2 --checkpoint_dir=" +
                  dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Issue 19 point 2: a rank that cannot write its hook file fails the
// checkpoint on every rank; nothing is committed, and the resume takes the
// previous complete checkpoint, never the stale file.
TEST(TrainResumeTest, AFailedHookFileWriteCommitsNothing) {
  const std::string dir = fresh_dir("resume_failed_write");
  const std::string common = kSmall + " --checkpoint_every=2 --hook=powersgd:rank=1,start_iter=2"
                                      " --checkpoint_dir=" + dir;
  ASSERT_EQ(run_command(common + " --max_steps=2").exit_code, 0);
  // Rank 1's temporary file for step 4 cannot be created: a folder is in
  // its way (as a full disk or a lost mount would stop it).
  ASSERT_EQ(run_command("mkdir -p " + dir + "/step-00000004/hook_rank1.bin.tmp").exit_code, 0);
  RunResult r = run_command(common + " --max_steps=6");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint of step 4 not committed: open(" + dir +
                          "/step-00000004/hook_rank1.bin.tmp)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 1 could not write " + dir + "/step-00000004/hook_rank1.bin"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(dir + "/latest"), "step-00000002\n");
  EXPECT_EQ(read_file(dir + "/step-00000004/MANIFEST"), "");
  ASSERT_EQ(run_command("rmdir " + dir + "/step-00000004/hook_rank1.bin.tmp").exit_code, 0);
  r = run_command(common + " --max_steps=6");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + dir + "/step-00000002:"), std::string::npos)
      << r.output;
}

// --keep_checkpoints: only the newest K complete checkpoints stay.
TEST(TrainResumeTest, KeepsTheLastKCheckpoints) {
  const std::string dir = fresh_dir("resume_keep");
  ASSERT_EQ(run_command(kSmall + " --checkpoint_every=1 --max_steps=7 --keep_checkpoints=3"
                        " --checkpoint_dir=" + dir).exit_code, 0);
  RunResult ls = run_command("ls " + dir);
  EXPECT_EQ(ls.output, "LOCK\nlatest\nstep-00000005\nstep-00000006\nstep-00000007\n");
  EXPECT_EQ(read_file(dir + "/latest"), "step-00000007\n");
}

}  // namespace
}  // namespace ddpx::integration_test
