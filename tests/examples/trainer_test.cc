// The trainer's pieces that need no process group: flag parsing, JSON lines,
// learning-rate schedules (checkpoints: checkpoint_format_test).
#include <cmath>
#include <sstream>

#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/lr_schedule.h"
#include "examples/trainer/metrics.h"
#include "examples/trainer/trainer.h"
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
