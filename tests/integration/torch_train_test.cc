// End-to-end: //examples/torch:train (the residual CNN with
// ddpx::torch::DistributedDataParallel) as real processes, 2 ranks over Gloo
// on loopback, on the real Fashion-MNIST files: the launch, progress lines,
// metrics JSON, --backend, file:// and tcp:// init, and checkpoint/resume,
// which the libtorch trainer shares with //examples:train (torchrun and
// SLURM launches: torchrun_torch_train_test, slurm_torch_train_test).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// 256 images / 2 ranks / batch 16 = 8 steps per epoch; width 4 keeps each
// step and the test-set evaluation short under the sanitizers.
const std::string kTorchTrain = "examples/torch/train --width=4 --batch_size=16 --train_limit=256"
                                " --threads=1 --timeout_s=60";

TEST(TorchTrainTest, LaunchesRanksAndReportsProgressAndMetrics) {
  const std::string dir = fresh_dir("torch_launch");
  RunResult r = run_command(kTorchTrain + " --nproc=2 --epochs=2 --log_every=4 --metrics_out=" +
                            dir + "/m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 ranks x batch 16, 8 steps/epoch, backend gloo"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("epoch 2/2 step 8/8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 2: train loss"), std::string::npos) << r.output;
  std::vector<MetricsLine> all = read_metrics(dir + "/m.jsonl");
  std::vector<MetricsLine> steps = lines_of_type(all, "step");
  std::vector<MetricsLine> epochs = lines_of_type(all, "epoch");
  ASSERT_EQ(steps.size(), 16u);
  ASSERT_EQ(epochs.size(), 2u);
  for (const MetricsLine& s : steps) {
    EXPECT_GT(number(s, "loss"), 0.0);
    EXPECT_GT(number(s, "step_time_s"), 0.0);
    EXPECT_GT(number(s, "bytes_sent"), 0.0);
  }
  EXPECT_EQ(epochs[1]["backend"], "gloo");
  EXPECT_EQ(epochs[1]["model"], "cnn");
  EXPECT_EQ(number(epochs[1], "world_size"), 2.0);
  // Trained, not diverged: better than chance (10%) on the 10000 test images.
  EXPECT_GT(number(epochs[1], "test_acc"), 0.2);
}

TEST(TorchTrainTest, BackendFlagSwapsTheBackend) {
  const std::string dir = fresh_dir("torch_backend");
  RunResult r = run_command(kTorchTrain + " --nproc=2 --epochs=1 --max_steps=3 --log_every=1000"
                            " --backend='round_robin:gloo*2' --metrics_out=" + dir + "/m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<MetricsLine> epochs = lines_of_type(read_metrics(dir + "/m.jsonl"), "epoch");
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0]["backend"], "round_robin:gloo*2");
}

// Ranks started by hand meet through --init=file:// and --init=tcp://
// (rank 0 serves the store), each rank from --rank/--world_size.
void expect_ranks_started_by_hand_train(const std::string& dir, const std::string& init) {
  const std::string out = run_ranks(dir, 2, [&](int r) {
    return kTorchTrain + " --epochs=1 --max_steps=2 --log_every=1000 " + init +
           " --world_size=2 --rank=" + std::to_string(r);
  });
  EXPECT_NE(out.find("rank 0 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("2 ranks x batch 16"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 2 steps"), std::string::npos) << out;
}

TEST(TorchTrainTest, RanksStartedByHandMeetThroughFileInit) {
  const std::string dir = fresh_dir("torch_file_init");
  expect_ranks_started_by_hand_train(dir, "--init=file://" + dir + "/rendezvous");
}

TEST(TorchTrainTest, RanksStartedByHandMeetThroughTcpInit) {
  expect_ranks_started_by_hand_train(fresh_dir("torch_tcp_init"),
                                     "--init=tcp://127.0.0.1:" + std::to_string(free_port()));
}

// Stop at step 11 (mid-epoch 2) and resume to step 20: every loss after the
// resume equals the uninterrupted run's, so model, optimizer, DDP buckets
// and PowerSGD's state (error feedback, Qs) came back bit for bit.
TEST(TorchTrainTest, ResumeWithPowerSgdContinuesBitExactly) {
  const std::string dir = fresh_dir("torch_resume");
  // A constant lr: cosine's length follows --max_steps, which differs here.
  const std::string common = kTorchTrain + " --nproc=2 --epochs=3 --log_every=1000"
                             " --lr_schedule=constant --hook='powersgd:rank=1,start_iter=3'";
  ASSERT_NO_FATAL_FAILURE(expect_resume_matches_whole_run(common, dir, 11, 20));
  std::vector<MetricsLine> ea = lines_of_type(read_metrics(dir + "/whole.jsonl"), "epoch");
  std::vector<MetricsLine> eb = lines_of_type(read_metrics(dir + "/split.jsonl"), "epoch");
  ASSERT_FALSE(ea.empty());
  ASSERT_FALSE(eb.empty());
  EXPECT_EQ(ea.back()["test_acc"], eb.back()["test_acc"]);
}

}  // namespace
}  // namespace ddpx::integration_test
