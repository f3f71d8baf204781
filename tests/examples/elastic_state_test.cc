// The state an elastic generation's rank 0 sends to newcomers
// (examples/trainer/elastic_state.h): what is saved loads back the same,
// and a blob that is not one is refused naming what is wrong.
#include "examples/trainer/elastic_state.h"

#include <istream>
#include <ostream>
#include <string>

#include "gtest/gtest.h"

namespace ddpx::trainer {
namespace {

// A model and an optimizer as two strings, each saved with its length.
class StringState : public TrainState {
 public:
  std::string model, optimizer;
  absl::Status save_model(std::ostream& out) const override { return save(out, model); }
  absl::Status save_optimizer(std::ostream& out) const override { return save(out, optimizer); }
  absl::Status load_model(std::istream& in) override { return load(in, &model); }
  absl::Status load_optimizer(std::istream& in) override { return load(in, &optimizer); }

 private:
  static absl::Status save(std::ostream& out, const std::string& s) {
    const uint64_t n = s.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof(n));
    out.write(s.data(), static_cast<std::streamsize>(n));
    return absl::OkStatus();
  }
  static absl::Status load(std::istream& in, std::string* s) {
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof(n));
    if (!in || n > (1u << 20)) return absl::DataLossError("string state: bad length");
    s->resize(n);
    in.read(s->data(), static_cast<std::streamsize>(n));
    if (!in) return absl::DataLossError("string state: cut short");
    return absl::OkStatus();
  }
};

ElasticPosition some_position() {
  ElasticPosition p;
  p.progress.epoch = 2;
  p.progress.step_in_epoch = 17;
  p.progress.global_step = 283;
  p.progress.epoch_loss_sum = 9.25;
  p.progress.epoch_loss_count = 17;
  p.consumed = 17 * 64;
  return p;
}

TEST(ElasticStateTest, LoadsBackThePositionModelAndOptimizer) {
  StringState sent;
  sent.model = "weights";
  sent.optimizer = "momentum";
  absl::StatusOr<std::string> blob = save_elastic_state(some_position(), sent);
  ASSERT_TRUE(blob.ok()) << blob.status();

  StringState received;
  ElasticPosition p;
  ASSERT_TRUE(load_elastic_state(*blob, &p, received).ok());
  EXPECT_EQ(received.model, "weights");
  EXPECT_EQ(received.optimizer, "momentum");
  EXPECT_EQ(p.progress.epoch, 2);
  EXPECT_EQ(p.progress.step_in_epoch, 17);
  EXPECT_EQ(p.progress.global_step, 283);
  EXPECT_EQ(p.progress.epoch_loss_sum, 9.25);
  EXPECT_EQ(p.progress.epoch_loss_count, 17);
  EXPECT_EQ(p.consumed, 17 * 64);
}

TEST(ElasticStateTest, RefusesABlobItDidNotWriteNamingWhatIsWrong) {
  StringState state;
  state.model = "weights";
  state.optimizer = "momentum";
  const std::string blob = save_elastic_state(some_position(), state).value();
  ElasticPosition p;
  auto refusal = [&](const std::string& bytes) {
    absl::Status s = load_elastic_state(bytes, &p, state);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    return std::string(s.message());
  };
  EXPECT_NE(refusal("X" + blob.substr(1)).find("DDPXELST"), std::string::npos);
  EXPECT_NE(refusal(blob.substr(0, 8 + sizeof(ElasticPosition) - 1)).find("cut short"),
            std::string::npos);
  EXPECT_NE(refusal(blob + "?").find("bytes left"), std::string::npos);
}

}  // namespace
}  // namespace ddpx::trainer
