// The trainer's pieces that need no process group: flag parsing, JSON lines,
// learning-rate schedules (checkpoints: checkpoint_format_test).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/lr_schedule.h"
#include "examples/trainer/metrics.h"
#include "examples/trainer/mlp_step.h"
#include "gtest/gtest.h"

namespace ddpx::trainer {
namespace {

TEST(ParseHiddenTest, ParsesWidthsAndNamesTheBadOne) {
  EXPECT_EQ(parse_hidden("2048,512").value(), (std::vector<int64_t>{2048, 512}));
  EXPECT_TRUE(parse_hidden("").value().empty());
  absl::StatusOr<std::vector<int64_t>> bad = parse_hidden("128,x7");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x7'"), std::string::npos) << bad.status();
  EXPECT_FALSE(parse_hidden("128,-4").ok());
}

TEST(JsonLineTest, EscapesStringsAndWritesNullForNonFinite) {
  JsonLine l;
  l.add("hook", std::string("a\"b\\c")).add("n", int64_t{3}).add("x", 0.5).add("bad", NAN);
  EXPECT_EQ(l.str(), R"({"hook":"a\"b\\c","n":3,"x":0.5,"bad":null})");
}

// One epoch of `steps` steps, 2 ranks x 10 samples, 8 kB of gradients.
StepReport one_epoch_of(int64_t steps) {
  StepReport step;
  step.epochs = 1;
  step.steps_per_epoch = steps;
  step.world_size = 2;
  step.batch = step.batch_size = 10;
  step.gradient_bytes = 8000;
  return step;
}

TEST(StepLogTest, WritesEveryStepsJsonAndAProgressLineEveryLogEveryAndAtTheEpochsEnd) {
  const std::string path = ::testing::TempDir() + "/step_log_metrics.jsonl";
  std::remove(path.c_str());
  MetricsWriter metrics;
  ASSERT_TRUE(metrics.open(path).ok());
  LiveLine live;  // stdout is no TTY under the test runner: one plain line each
  StepLog log(metrics, live, /*log_every=*/2);
  StepReport step = one_epoch_of(3);
  step.bytes_sent = 2000;
  step.compression_ratio = 4;
  step.lr = 0.5;
  ::testing::internal::CaptureStdout();
  for (int64_t i = 0; i < 3; ++i) {
    step.step_in_epoch = i;
    step.global_step = i + 1;
    step.loss = 1.0 / (i + 1);
    step.step_time_s = 0.1 * (i + 1);  // 0.1, 0.2, 0.3 s
    step.comm_wait_s = 0.01;
    step.wall_s = i + 1.0;
    if (i == 2) step.batch = 4;  // the epoch's short last batch
    log.write(step);
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  // Two steps of 2 ranks x 10 samples in 0.3 s, then a window of one step
  // (counted at the nominal batch) in 0.3 s; the comm wait is per step.
  EXPECT_EQ(out,
            "epoch 1/1 step 2/3 | 133 samples/s | loss 0.5000 | sent 2 kB/step | ratio 4.0x | "
            "comm wait 10.0 ms/step\n"
            "epoch 1/1 step 3/3 | 67 samples/s | loss 0.3333 | sent 2 kB/step | ratio 4.0x | "
            "comm wait 10.0 ms/step\n");
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], R"({"type":"step","epoch":1,"step":3,"loss":0.333333333,"step_time_s":0.3,)"
                      R"("comm_wait_s":0.01,"samples_per_s":26.6666667,"bytes_sent":2000,)"
                      R"("gradient_bytes":8000,"compression_ratio":4,"lr":0.5,"wall_s":3})");
}

TEST(StepLogTest, SaysNoRatioWhereNothingWasSent) {
  // A hierarchical hook on one host sends nothing between hosts.
  const std::string path = ::testing::TempDir() + "/step_log_nothing_sent.jsonl";
  std::remove(path.c_str());
  MetricsWriter metrics;
  ASSERT_TRUE(metrics.open(path).ok());
  LiveLine live;
  StepLog log(metrics, live, /*log_every=*/1);
  StepReport step = one_epoch_of(2);  // bytes_sent 0
  step.step_time_s = 0.1;
  ::testing::internal::CaptureStdout();
  log.write(step);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out,
            "epoch 1/1 step 1/2 | 200 samples/s | loss 0.0000 | sent 0 B/step | ratio - | "
            "comm wait 0.0 ms/step\n");
}

// examples/benchmarks/elastic.sh reads these fields by their order
// ("joined" before "step").
TEST(MembershipReportTest, PrintsTheChangeAndWritesItsJsonLine) {
  MembershipReport r;
  r.generation = 2;
  r.world_size = 3;
  r.members = {1, 3, 4};
  r.left = {2};
  r.global_step = 41;
  r.recovery_s = 0.5;
  r.steps_lost = 1;
  r.cause = "rank 2: \"gone\"";
  r.wall_s = 3.25;
  ::testing::internal::CaptureStdout();
  const std::string line = report_membership(r).str();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "membership: generation 2, 3 ranks (members 1,3,4); left: 2, at step 41, "
                 "recovered in 0.500 s, 1 step lost; cause: rank 2: \"gone\"\n");
  const std::string head =
      R"({"type":"membership","generation":2,"world_size":3,"members":"1,3,4","left":"2",)"
      R"("joined":"","step":41,"recovery_s":0.5,"steps_lost":1,"cause":"rank 2: \"gone\"",)"
      R"("failed_starts":"","wall_s":3.25,"unix_ms":)";
  EXPECT_EQ(line.substr(0, head.size()), head);

  MembershipReport admission;
  admission.generation = 3;
  admission.world_size = 4;
  admission.members = {1, 3, 4, 5};
  admission.joined = {5};
  admission.global_step = 50;
  ::testing::internal::CaptureStdout();
  const std::string admitted = report_membership(admission).str();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "membership: generation 3, 4 ranks (members 1,3,4,5); joined: 5, at step 50, "
            "recovered in 0.000 s, 0 steps lost\n");
  EXPECT_NE(admitted.find(R"("joined":"5")"), std::string::npos) << admitted;
  EXPECT_NE(admitted.find(R"("cause":"admission")"), std::string::npos) << admitted;
}

TEST(HumanBytesTest, PicksAUnit) {
  EXPECT_EQ(human_bytes(12), "12 B");
  EXPECT_EQ(human_bytes(23300000), "23.3 MB");
}

TEST(LrScheduleTest, ConstantKeepsTheBaseRate) {
  for (int64_t step : {0, 5, 99, 500})
    EXPECT_EQ(learning_rate_at(LrSchedule::kConstant, 0.1f, step, 100), 0.1f);
}

TEST(LrScheduleTest, CosineFallsFromTheBaseRateToZero) {
  EXPECT_FLOAT_EQ(learning_rate_at(LrSchedule::kCosine, 0.1f, 0, 100), 0.1f);
  EXPECT_FLOAT_EQ(learning_rate_at(LrSchedule::kCosine, 0.1f, 50, 100), 0.05f);
  // cos(pi/4): a quarter of the way down the curve.
  EXPECT_NEAR(learning_rate_at(LrSchedule::kCosine, 0.1f, 25, 100),
              0.05 * (1 + std::sqrt(0.5)), 1e-7);
  EXPECT_NEAR(learning_rate_at(LrSchedule::kCosine, 0.1f, 100, 100), 0.0f, 1e-9);
  EXPECT_NEAR(learning_rate_at(LrSchedule::kCosine, 0.1f, 150, 100), 0.0f, 1e-9);
  float previous = 1.0f;
  for (int64_t step = 0; step <= 100; ++step) {
    const float lr = learning_rate_at(LrSchedule::kCosine, 0.1f, step, 100);
    EXPECT_LE(lr, previous) << "step " << step;
    previous = lr;
  }
}

TEST(LrScheduleTest, ParsesNamesAndNamesTheBadOne) {
  EXPECT_EQ(parse_lr_schedule("cosine").value(), LrSchedule::kCosine);
  EXPECT_EQ(parse_lr_schedule("constant").value(), LrSchedule::kConstant);
  absl::StatusOr<LrSchedule> bad = parse_lr_schedule("linear");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("linear"), std::string::npos);
}

}  // namespace
}  // namespace ddpx::trainer
