// The post/sleeper fence of asymmetric_fence.h as a store-buffering litmus
// test: a poster stores its counter and, with only a compiler fence, reads
// the sleeper count; a sleeper counts itself in, fences every poster, and
// reads the counter. Without a real fence on one side, x86 lets both reads
// miss the other's store (each store still in its core's store buffer); a
// post would then miss its sleeper.
#include <atomic>
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/shm/asymmetric_fence.h"

namespace ddpx {
namespace shm {
namespace {

TEST(AsymmetricFence, NoPostMissesASleeper) {
  if (!posts_may_skip_fence()) {
    fprintf(stderr, "\n*** SKIPPED: the kernel refuses membarrier(GLOBAL_EXPEDITED) here; "
                    "posts keep their full fence ***\n\n");
    GTEST_SKIP() << "membarrier refused";
  }
  constexpr int kRounds = 20000;
  std::atomic<int> go{0};
  std::atomic<uint32_t> counter{0}, sleepers{0};
  std::atomic<int> both_missed{0};
  uint32_t poster_saw[2] = {0, 0};
  std::thread poster([&] {
    for (int i = 1; i <= kRounds; ++i) {
      while (go.load(std::memory_order_acquire) < 2 * i - 1) {
      }
      counter.store(static_cast<uint32_t>(i), std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      poster_saw[i & 1] = sleepers.load(std::memory_order_relaxed);
      go.fetch_add(1, std::memory_order_acq_rel);
    }
  });
  for (int i = 1; i <= kRounds; ++i) {
    go.fetch_add(1, std::memory_order_acq_rel);  // releases the poster's round i
    sleepers.store(static_cast<uint32_t>(i), std::memory_order_seq_cst);
    ASSERT_TRUE(fence_every_poster());
    const uint32_t seen = counter.load(std::memory_order_seq_cst);
    while (go.load(std::memory_order_acquire) < 2 * i) {
    }
    if (seen < static_cast<uint32_t>(i) && poster_saw[i & 1] < static_cast<uint32_t>(i)) {
      both_missed.fetch_add(1);
    }
  }
  poster.join();
  EXPECT_EQ(both_missed.load(), 0) << "rounds where the post and the sleeper missed each other";
}

}  // namespace
}  // namespace shm
}  // namespace ddpx
