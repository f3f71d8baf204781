// Ranks that the scheduler keeps on one CPU: move_off_cpu migrates the
// calling thread and leaves its affinity as it was, and two ranks started on
// one CPU end up on different ones while they run small ops.
#include "process_group/shm/cpu_sharing.h"

#include <sched.h>

#include <atomic>
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/process_group/shm/shm_test_util.h"

namespace ddpx {
namespace {

cpu_set_t affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return set;
}

bool skip_without_two_cpus() {
  const cpu_set_t allowed = affinity();
  if (CPU_COUNT(&allowed) >= 2) return false;
  fprintf(stderr, "SKIPPED LOUDLY: this process may run on one CPU only\n");
  return true;
}

TEST(CpuSharing, MoveOffCpuMigratesAndKeepsTheMask) {
  if (skip_without_two_cpus()) GTEST_SKIP() << "needs two CPUs";
  const cpu_set_t before = affinity();
  const int cpu = shm::current_cpu();
  ASSERT_GE(cpu, 0);
  ASSERT_TRUE(shm::move_off_cpu(cpu));
  EXPECT_NE(shm::current_cpu(), cpu);
  const cpu_set_t after = affinity();
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(CpuSharing, RefusesWhenTheCpuIsTheOnlyOneAllowed) {
  const cpu_set_t before = affinity();
  const int cpu = shm::current_cpu();
  ASSERT_GE(cpu, 0);
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(cpu, &only);
  ASSERT_EQ(sched_setaffinity(0, sizeof(only), &only), 0);
  EXPECT_FALSE(shm::move_off_cpu(cpu));
  const cpu_set_t during = affinity();
  EXPECT_TRUE(CPU_EQUAL(&only, &during));
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_FALSE(shm::move_off_cpu(-1));
}

// Both ranks are put on the first allowed CPU and given their whole mask
// back: the scheduler may leave them there for long (cpu_sharing.h), and
// the higher rank moves off after a few waits that found the peer there.
TEST(CpuSharing, TwoRanksStartedOnOneCpuEndUpApart) {
  if (skip_without_two_cpus()) GTEST_SKIP() << "needs two CPUs";
  const cpu_set_t full = affinity();
  int first = 0;
  while (!CPU_ISSET(first, &full)) ++first;
  constexpr int kOps = 3000, kLast = 500;
  std::atomic<int> cpu_of[2] = {{-1}, {-1}};
  std::atomic<int> apart{0};
  rank_threads::run_gloo_backends(2, [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_shared_memory()) << b.shared_memory_status();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    ASSERT_EQ(sched_setaffinity(0, sizeof(full), &full), 0);
    Tensor t = Tensor::zeros({2}, DType::kFloat32);
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
      cpu_of[b.rank()].store(shm::current_cpu());
      if (b.rank() == 0 && i >= kOps - kLast && cpu_of[0].load() != cpu_of[1].load()) ++apart;
    }
  }, gloo_test::shm_options());
  // Ranks that stayed on one CPU would be apart at almost no op's end. On
  // a quiet machine they are apart at nearly every one; other processes
  // running on the second CPU (a loaded machine, a sanitizer build) push
  // the ranks back together for a while, down to 47% measured.
  EXPECT_GE(apart.load(), kLast / 5) << "of the last " << kLast << " ops";
}

}  // namespace
}  // namespace ddpx
