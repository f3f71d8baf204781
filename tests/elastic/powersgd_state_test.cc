// The PowerSGD hook's state as elastic training carries it
// (examples/trainer/elastic_membership.h): saved at a commit and loaded
// into the next generation's hook, whole; sent to a newcomer without the
// sender's own residual (CommHook::drop_local_state).
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/powersgd_hook.h"
#include "hooks/powersgd_state.h"

namespace ddpx {
namespace {

std::shared_ptr<PowerSGDState> state_with_history() {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powerSGD_iter = 2;
  std::shared_ptr<PowerSGDState> s = PowerSGDState::create(o).value();
  for (size_t bucket : {0, 3}) {
    PowerSGDBucketMemory& m = s->bucket_memory(bucket);
    m.error = {1.5f + bucket, -2.0f, 0.25f, 7.0f};
    m.p_memory = {0.5f, 0.25f + bucket};
    m.q_memory = {-1.0f, 3.0f, 2.0f + bucket};
    m.low_rank_initialized = true;
  }
  for (int i = 0; i < 5; ++i) s->maybe_increase_iter(/*bucket_is_last=*/true);
  s->next_random_seed();
  s->record_compression(100, 20, /*bucket_is_last=*/false);
  return s;
}

std::string saved(const CommHook& hook) {
  std::ostringstream out;
  EXPECT_TRUE(hook.save_state(out).ok());
  return out.str();
}

absl::Status load(CommHook& hook, const std::string& bytes) {
  std::istringstream in(bytes);
  return hook.load_state(in);
}

TEST(PowerSGDStateTest, ASavedStateLoadsIntoAFreshHookWhole) {
  PowerSGDHook sender(nullptr, state_with_history());
  const std::string bytes = saved(sender);
  PowerSGDHook receiver(nullptr, PowerSGDState::create(PowerSGDOptions{}).value());
  ASSERT_TRUE(load(receiver, bytes).ok());
  EXPECT_EQ(saved(receiver), bytes);
  EXPECT_EQ(receiver.state_iteration(), 5);
  EXPECT_EQ(receiver.state().options().matrix_approximation_rank, 2);
  EXPECT_EQ(receiver.state().bucket_memory(3).error, sender.state().bucket_memory(3).error);
  // The generator goes on where the sender's is.
  EXPECT_EQ(receiver.state().next_random_seed(), sender.state().next_random_seed());
}

TEST(PowerSGDStateTest, DroppingTheLocalStateKeepsWhatEveryRankHoldsAlike) {
  PowerSGDHook sender(nullptr, state_with_history());
  PowerSGDHook newcomer(nullptr, PowerSGDState::create(PowerSGDOptions{}).value());
  ASSERT_TRUE(load(newcomer, saved(sender)).ok());
  newcomer.drop_local_state();
  for (size_t bucket : {0, 3}) {
    const PowerSGDBucketMemory& got = newcomer.state().bucket_memory(bucket);
    const PowerSGDBucketMemory& had = sender.state().bucket_memory(bucket);
    EXPECT_TRUE(got.error.empty()) << bucket;
    EXPECT_FALSE(got.device_error.defined()) << bucket;
    EXPECT_EQ(got.p_memory, had.p_memory) << bucket;
    EXPECT_EQ(got.q_memory, had.q_memory) << bucket;
    EXPECT_TRUE(got.low_rank_initialized) << bucket;
  }
  EXPECT_EQ(newcomer.state_iteration(), sender.state_iteration());
  EXPECT_EQ(newcomer.state().compression_stats().numel_before, 100);
  // What is left is what the sender has without its residual: the same
  // bytes on both once the sender drops its own.
  const std::string newcomer_bytes = saved(newcomer);
  EXPECT_NE(newcomer_bytes, saved(sender));
  sender.drop_local_state();
  EXPECT_EQ(newcomer_bytes, saved(sender));
}

TEST(PowerSGDStateTest, AStatelessHookSavesNothingAndDropsNothing) {
  struct Plain : CommHook {
    std::string name() const override { return "plain"; }
    std::shared_ptr<Future<Tensor>> run(GradBucket&) override { return nullptr; }
  } plain;
  EXPECT_EQ(saved(plain), "");
  plain.drop_local_state();
  EXPECT_EQ(plain.state_iteration(), -1);
}

}  // namespace
}  // namespace ddpx
