// PowerSGDState without a process group: iteration counting, compression
// statistics and the checkpoint format.
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/powersgd_state.h"

namespace ddpx {
namespace {

std::shared_ptr<PowerSGDState> make_state(PowerSGDOptions o = {}) {
  auto s = PowerSGDState::create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(PowerSGDState, IterationAdvancesOnlyOnTheLastBucket) {
  PowerSGDOptions o;
  o.start_powerSGD_iter = 2;
  auto state = make_state(o);
  std::vector<std::string> lines;
  state->set_log_sink([&](const std::string& l) { lines.push_back(l); });
  EXPECT_FALSE(state->compressing());
  state->maybe_increase_iter(false);
  state->maybe_increase_iter(false);
  EXPECT_EQ(state->iter(), 0);
  state->maybe_increase_iter(true);
  EXPECT_EQ(state->iter(), 1);
  EXPECT_FALSE(state->compressing());
  EXPECT_TRUE(lines.empty());
  state->maybe_increase_iter(true);
  EXPECT_EQ(state->iter(), 2);
  EXPECT_TRUE(state->compressing());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("start to apply PowerSGD after 2 iterations"),
            std::string::npos);
}

TEST(PowerSGDState, StatisticsAccumulateAndAreLoggedEveryNIterations) {
  PowerSGDOptions o;
  o.start_powerSGD_iter = 2;
  o.compression_stats_logging_frequency = 3;
  auto state = make_state(o);
  std::vector<std::string> lines;
  state->set_log_sink([&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(state->compression_stats().compress_rate, 0);
  state->maybe_increase_iter(true);
  state->maybe_increase_iter(true);
  lines.clear();
  std::vector<int64_t> logged_at;
  for (int it = 2; it < 10; ++it) {
    size_t before = lines.size();
    state->record_compression(100, 20, /*bucket_is_last=*/false);
    EXPECT_EQ(lines.size(), before);  // only the last bucket reports
    state->record_compression(300, 30, /*bucket_is_last=*/true);
    if (lines.size() > before) logged_at.push_back(it);
    state->maybe_increase_iter(true);
  }
  EXPECT_EQ(logged_at, (std::vector<int64_t>{2, 5, 8}));
  CompressionStats s = state->compression_stats();
  EXPECT_EQ(s.numel_before, 8 * 400);
  EXPECT_EQ(s.numel_after, 8 * 50);
  EXPECT_DOUBLE_EQ(s.compress_rate, 8.0);
  EXPECT_NE(lines[0].find("total before compression 400, total after compression 50, rate 8"),
            std::string::npos)
      << lines[0];
}

TEST(PowerSGDCheckpoint, RoundTripsEverything) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 3;
  o.start_powerSGD_iter = 5;
  o.min_compression_rate = 1.5;
  o.use_error_feedback = false;
  o.warm_start = true;
  o.orthogonalization_epsilon = 1e-6f;
  o.random_seed = 99;
  o.compression_stats_logging_frequency = 17;
  o.batch_tensors_with_same_shape = true;
  auto state = make_state(o);
  state->set_log_sink([](const std::string&) {});
  for (int i = 0; i < 6; ++i) state->maybe_increase_iter(true);
  state->record_compression(1000, 10, true);
  state->next_random_seed();
  PowerSGDBucketMemory& b0 = state->bucket_memory(0);
  b0.error = {1.5f, -2.25f, 3.0f};
  b0.p_memory = {0.5f};
  b0.q_memory = {0.25f, 0.125f};
  b0.low_rank_initialized = true;
  PowerSGDBucketMemory& b7 = state->bucket_memory(7);
  b7.error = {4.0f};
  b7.low_rank_initialized = true;  // initialized, nothing compressed

  std::stringstream image;
  ASSERT_TRUE(state->save(image).ok());
  auto restored = make_state();  // different options: the image's win
  ASSERT_TRUE(restored->load(image).ok());
  const PowerSGDOptions& r = restored->options();
  EXPECT_EQ(r.matrix_approximation_rank, 3);
  EXPECT_EQ(r.start_powerSGD_iter, 5);
  EXPECT_EQ(r.min_compression_rate, 1.5);
  EXPECT_FALSE(r.use_error_feedback);
  EXPECT_TRUE(r.warm_start);
  EXPECT_EQ(r.orthogonalization_epsilon, 1e-6f);
  EXPECT_EQ(r.random_seed, 99u);
  EXPECT_EQ(r.compression_stats_logging_frequency, 17);
  EXPECT_TRUE(r.batch_tensors_with_same_shape);
  EXPECT_EQ(restored->iter(), 6);
  EXPECT_EQ(restored->compression_stats().numel_before, 1000);
  EXPECT_EQ(restored->compression_stats().numel_after, 10);
  EXPECT_EQ(restored->next_random_seed(), state->next_random_seed());
  EXPECT_EQ(restored->bucket_indices(), (std::vector<size_t>{0, 7}));
  EXPECT_EQ(restored->bucket_memory(0).error, b0.error);
  EXPECT_EQ(restored->bucket_memory(0).p_memory, b0.p_memory);
  EXPECT_EQ(restored->bucket_memory(0).q_memory, b0.q_memory);
  EXPECT_TRUE(restored->bucket_memory(7).low_rank_initialized);
  EXPECT_EQ(restored->bucket_memory(7).error, b7.error);
  // The next statistics report is restored too: nothing is logged until 17
  // iterations after the one logged before the save.
  std::vector<std::string> lines;
  restored->set_log_sink([&](const std::string& l) { lines.push_back(l); });
  restored->record_compression(1, 1, true);
  EXPECT_TRUE(lines.empty());
}

TEST(PowerSGDCheckpoint, BadImagesFailWithTheReason) {
  auto state = make_state();
  state->bucket_memory(3).error = {1, 2, 3, 4};
  std::stringstream good;
  ASSERT_TRUE(state->save(good).ok());
  const std::string image = good.str();

  auto load = [](const std::string& bytes) {
    std::stringstream in(bytes);
    return make_state()->load(in);
  };
  absl::Status magic = load("NOTPSGD" + image.substr(7));
  EXPECT_EQ(magic.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(magic.message().find("bad magic"), std::string::npos);

  std::string v2 = image;
  v2[8] = 2;
  absl::Status version = load(v2);
  EXPECT_NE(version.message().find("version 2 is not supported"), std::string::npos);

  for (size_t cut : {size_t{4}, size_t{20}, image.size() / 2, image.size() - 1}) {
    absl::Status truncated = load(image.substr(0, cut));
    EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss) << cut;
    EXPECT_NE(truncated.message().find("stream ended"), std::string::npos) << cut;
  }
  // A failed load leaves the state as it was.
  auto keep = make_state();
  keep->bucket_memory(1).error = {9};
  std::stringstream cut_in(image.substr(0, image.size() / 2));
  EXPECT_FALSE(keep->load(cut_in).ok());
  EXPECT_EQ(keep->bucket_memory(1).error, std::vector<float>{9});
  EXPECT_TRUE(load(image).ok());
}

}  // namespace
}  // namespace ddpx
