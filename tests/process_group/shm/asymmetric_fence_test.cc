// The post/sleeper fence of asymmetric_fence.h as a store-buffering litmus
// test: a poster stores its counter and, with only a compiler fence, reads
// the sleeper count; a sleeper counts itself in, fences every poster, and
// reads the counter. Without a real fence on one side, x86 lets both reads
// miss the other's store (each store still in its core's store buffer); a
// post would then miss its sleeper.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/shm/asymmetric_fence.h"

namespace ddpx {
namespace shm {
namespace {

// Rounds of the litmus test in which the post and the sleeper both missed
// the other's store.
int missed_rounds(int rounds) {
  std::atomic<int> go{0};
  std::atomic<uint32_t> counter{0}, sleepers{0};
  int both_missed = 0;
  uint32_t poster_saw[2] = {0, 0};
  std::thread poster([&] {
    for (int i = 1; i <= rounds; ++i) {
      while (go.load(std::memory_order_acquire) < 2 * i - 1) {
      }
      counter.store(static_cast<uint32_t>(i), std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      poster_saw[i & 1] = sleepers.load(std::memory_order_relaxed);
      go.fetch_add(1, std::memory_order_acq_rel);
    }
  });
  for (int i = 1; i <= rounds; ++i) {
    go.fetch_add(1, std::memory_order_acq_rel);  // releases the poster's round i
    sleepers.store(static_cast<uint32_t>(i), std::memory_order_seq_cst);
    const bool fenced = fence_every_poster();
    const uint32_t seen = counter.load(std::memory_order_seq_cst);
    while (go.load(std::memory_order_acquire) < 2 * i) {
    }
    if (!fenced) ++both_missed;  // counted as a miss: the fence is the point
    if (seen < static_cast<uint32_t>(i) && poster_saw[i & 1] < static_cast<uint32_t>(i)) {
      ++both_missed;
    }
  }
  poster.join();
  return both_missed;
}

bool skip_without_membarrier() {
  if (posts_may_skip_fence()) return false;
  fprintf(stderr, "\n*** SKIPPED: the kernel refuses membarrier(GLOBAL_EXPEDITED) here; "
                  "posts keep their full fence ***\n\n");
  return true;
}

TEST(AsymmetricFence, NoPostMissesASleeper) {
  if (skip_without_membarrier()) GTEST_SKIP() << "membarrier refused";
  EXPECT_EQ(missed_rounds(20000), 0) << "rounds where the post and the sleeper missed each other";
}

// A child forked after its parent registered registers itself
// (posts_may_skip_fence registers once per pid, so a child does not rely on
// its parent's registration), and its posts and sleepers never miss.
TEST(AsymmetricFence, AForkedChildRegistersItself) {
  if (skip_without_membarrier()) GTEST_SKIP() << "membarrier refused";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool registered = posts_may_skip_fence();
    // Fewer rounds than the litmus test above: this case is about the
    // child's own registration, and each round costs a membarrier.
    _exit(registered && missed_rounds(5000) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's posts and sleepers missed each other";
}

}  // namespace
}  // namespace shm
}  // namespace ddpx
