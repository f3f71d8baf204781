// Leaving a group (closing_handshake.h): a rank that destroys its backend
// right after its last op does not fail peers still finishing that op, and
// leaving never hangs, whether peers leave at once, later, or never.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/gloo/allreduce_algorithms.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;
using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;

// Halving-doubling on 5 ranks finishes on some ranks before others; before
// the handshake, those leaving at once failed the rest now and then with
// "Connection closed by peer".
TEST(GlooClosing, LeavingRightAfterTheLastOpKeepsPeersWhole) {
  GlooOptions options = local_gloo_options();
  options.allreduce_algorithm = AllreduceAlgorithm::kHalvingDoubling;
  for (int round = 0; round < 8; ++round) {
    run_gloo_backends(5, [&](GlooBackend& b) {
      Tensor t = Tensor::zeros({30011}, DType::kInt32);
      t.fill_(b.rank() + 1);
      ASSERT_WORK_OK(b.allreduce({t}, {}));
      ASSERT_EQ(t.item(30010), 15);
      // No barrier: the backend is destroyed as soon as this returns.
    }, options);
  }
}

// All ranks' backends destroyed one after another from one thread (as
// tests holding every rank's group do): each waits at most the grace for
// peers that cannot answer yet.
TEST(GlooClosing, DestroyingEveryRankFromOneThreadIsQuick) {
  constexpr int kSize = 4;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<GlooBackend>> backends(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      auto b = GlooBackend::create(store, r, kSize, std::chrono::seconds(20), local_gloo_options(1));
      ASSERT_TRUE(b.ok()) << b.status();
      backends[r] = *b;
    });
  }
  for (auto& t : threads) t.join();
  const auto start = Clock::now();
  for (auto& b : backends) b.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

// A peer that stays (never destroys its group) costs the leaving rank the
// grace, not the group's timeout.
TEST(GlooClosing, APeerThatStaysDoesNotHoldTheLeaverBack) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::shared_ptr<GlooBackend> stayer;
  std::chrono::steady_clock::duration leave_time{};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto b = GlooBackend::create(store, r, 2, std::chrono::seconds(20), local_gloo_options(1));
      ASSERT_TRUE(b.ok()) << b.status();
      if (r == 1) {
        stayer = *b;
        return;
      }
      std::shared_ptr<GlooBackend> leaver = *b;
      const auto start = Clock::now();
      leaver.reset();
      leave_time = Clock::now() - start;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(leave_time, std::chrono::seconds(2));
  stayer.reset();
}

}  // namespace
}  // namespace ddpx
