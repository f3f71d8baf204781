// Checkpoint, stop, resume: the resumed run ends with exactly the model,
// optimizer and hook state of a run that never stopped, and logs the same
// losses after the resume point.
#include <sstream>
#include <string>

#include "examples/nn/serialize.h"
#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::testing {
namespace {

// state.bin without its header's wall-clock time: model and optimizer bytes.
std::string state_without_wall_time(const std::string& path) {
  std::istringstream in(read_file(path));
  std::string magic, wall;
  uint64_t v;
  EXPECT_TRUE(nn::read_string(in, &magic)) << path;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(nn::read_u64(in, &v));
  EXPECT_TRUE(nn::read_string(in, &wall));
  std::stringstream rest;
  rest << in.rdbuf();
  return rest.str();
}

void expect_resume_matches(const std::string& name, const std::string& hook) {
  const std::string dir = fresh_dir(name);
  // 1000 images / 2 ranks / batch 16 = 32 steps per epoch: the stop at step
  // 45 is mid-epoch 2 and the end (70) is in epoch 3.
  const std::string common = std::string(kTrainBinary) +
                             " --nproc=2 --hidden=96,64 --batch_size=16 --train_limit=1000"
                             " --epochs=5 --weight_decay=1e-4 --log_every=1000 --hook='" +
                             hook + "'";
  RunResult whole = run_command(common + " --max_steps=70 --checkpoint_dir=" + dir +
                                "/whole --metrics_out=" + dir + "/whole.jsonl");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  RunResult first = run_command(common + " --max_steps=45 --checkpoint_dir=" + dir +
                                "/split --metrics_out=" + dir + "/split.jsonl");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = run_command(common + " --max_steps=70 --checkpoint_dir=" + dir +
                                 "/split --metrics_out=" + dir + "/split.jsonl");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;

  // Same losses, step by step, including those after the resume.
  std::vector<MetricsLine> a = lines_of_type(read_metrics(dir + "/whole.jsonl"), "step");
  std::vector<MetricsLine> b = lines_of_type(read_metrics(dir + "/split.jsonl"), "step");
  ASSERT_EQ(a.size(), 70u);
  ASSERT_EQ(b.size(), 70u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "step " << i + 1;
  }
  // Same parameters and momentum, bit for bit, and the same hook state.
  const std::string whole_state = state_without_wall_time(dir + "/whole/state.bin");
  EXPECT_GT(whole_state.size(), 4u * 96 * 784);
  EXPECT_TRUE(whole_state == state_without_wall_time(dir + "/split/state.bin"))
      << "model/optimizer differ after resume";
  for (const char* f : {"/hook_rank0.bin", "/hook_rank1.bin"}) {
    EXPECT_TRUE(read_file(dir + "/whole" + f) == read_file(dir + "/split" + f)) << f;
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
}  // namespace ddpx::testing
