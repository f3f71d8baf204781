// The trainer's pieces that need no process group: flag parsing, JSON lines,
// checkpoints on disk.
#include <cmath>
#include <sstream>

#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/checkpoint.h"
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

// Hook state stand-in: a counter the checkpoint must carry per rank.
class CountingSync : public GradientSync {
 public:
  std::string describe() const override { return "counting"; }
  absl::Status prepare() override { return absl::OkStatus(); }
  void mark_ready(size_t) override {}
  absl::Status finish() override { return absl::OkStatus(); }
  SyncStats last_stats() const override { return {}; }
  absl::Status save_state(std::ostream& out) const override {
    out << value;
    return absl::OkStatus();
  }
  absl::Status load_state(std::istream& in) override {
    in >> value;
    return absl::OkStatus();
  }
  int value = 0;
};

TEST(CheckpointTest, RoundTripsAndRefusesAnotherWorldSize) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/ckpt";
  nn::Mlp model({6, {4}, 3, 1});
  nn::Sgd sgd(model.parameter_list(), {0.1f, 0.9f});
  model.parameter_list()[0]->grad.fill_(1.0);
  sgd.step();
  CountingSync sync;
  sync.value = 42;
  Progress p{2, 7, 77, 12.5, 4};
  ASSERT_TRUE(save_checkpoint(dir, 0, p, model, sgd, sync).ok());

  nn::Mlp other({6, {4}, 3, 9});
  nn::Sgd other_sgd(other.parameter_list(), {0.1f, 0.9f});
  CountingSync other_sync;
  absl::StatusOr<Progress> q = load_checkpoint(dir, 0, 4, other, other_sgd, other_sync);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->epoch, 2);
  EXPECT_EQ(q->step_in_epoch, 7);
  EXPECT_EQ(q->global_step, 77);
  EXPECT_DOUBLE_EQ(q->wall_seconds, 12.5);
  EXPECT_EQ(other_sync.value, 42);
  EXPECT_EQ(other_sgd.steps_taken(), 1);
  EXPECT_EQ(other.parameter_list()[0]->value.to_float_vector(),
            model.parameter_list()[0]->value.to_float_vector());

  absl::StatusOr<Progress> wrong = load_checkpoint(dir, 0, 2, other, other_sgd, other_sync);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("4 ranks"), std::string::npos) << wrong.status();
  // Rank 1 never wrote its hook state: incomplete, not silently fresh.
  absl::StatusOr<Progress> missing = load_checkpoint(dir, 1, 4, other, other_sgd, other_sync);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("hook_rank1.bin"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(load_checkpoint(dir + "/none", 0, 4, other, other_sgd,
                                               other_sync).status()));
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
