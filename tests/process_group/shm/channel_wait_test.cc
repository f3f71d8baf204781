// How a shared-memory waiter waits: a waiter whose yields hand its CPU to
// other threads goes to sleep instead of yielding on (WaitPolicy), so on a
// host with more runnable threads than CPUs it does not keep going through
// the scheduler (a syscall and a context switch per turn) while it waits.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/shm/channel.h"
#include "process_group/shm/layout.h"

namespace ddpx {
namespace shm {
namespace {

// Zeroed memory is an initial ChannelControl, as in a fresh segment.
struct Controls {
  Controls() {
    for (auto& c : mem) {
      c = std::aligned_alloc(kCacheLine, round_up(sizeof(ChannelControl), kCacheLine));
      memset(c, 0, sizeof(ChannelControl));
    }
  }
  ~Controls() {
    for (void* c : mem) std::free(c);
  }
  std::vector<ChannelControl*> get() const {
    return {static_cast<ChannelControl*>(mem[0]), static_cast<ChannelControl*>(mem[1])};
  }
  void* mem[2];
};

// Context switches of the calling thread so far.
long thread_switches() {
  rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

TEST(ChannelWait, AWaiterWhoseYieldsGiveItsCpuAwaySleeps) {
  const int cpu = first_allowed_cpu();
  ASSERT_GE(cpu, 0);
  Controls controls;
  std::vector<uint8_t> slot0(4096), slot1(4096);
  const std::vector<std::vector<uint8_t*>> slots = {{slot0.data()}, {slot1.data()}};
  // No spin, and a yield phase far longer than the wait: only the
  // contended-yield rule can end it early.
  WaitPolicy policy;
  policy.spin = std::chrono::nanoseconds(0);
  policy.yield = std::chrono::seconds(30);
  policy.move_off_shared_cpu = false;
  Channel waiter(0, 2, controls.get(), slots, 4096, {nullptr, nullptr}, policy);
  Channel poster(1, 2, controls.get(), slots, 4096, {nullptr, nullptr}, policy);
  const OpDescription op{OpDescription::kBarrier, 0, -1, 0};

  // A thread that wants the waiter's CPU all the time.
  std::atomic<bool> stop{false};
  std::atomic<bool> hog_pinned{false};
  std::thread hog([&] {
    hog_pinned = pin_to(cpu);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (!hog_pinned) std::this_thread::yield();
  constexpr auto kPostAfter = std::chrono::milliseconds(300);
  std::thread peer([&] {
    poster.begin_op(op);
    std::this_thread::sleep_for(kPostAfter);
    poster.post();
  });

  long switches = 0;
  absl::Status waited;
  std::thread wait([&] {
    ASSERT_TRUE(pin_to(cpu));
    waiter.begin_op(op);
    const long before = thread_switches();
    waited = waiter.wait_all(waiter.post(), Deadline::after(std::chrono::seconds(20)));
    switches = thread_switches() - before;
  });
  wait.join();
  peer.join();
  stop = true;
  hog.join();
  ASSERT_TRUE(waited.ok()) << waited;
  // Yielding through the whole wait switches to the hog and back once per
  // scheduler time slice (about 75 times in 300 ms on a 2-vCPU VM); the
  // waiter that sleeps after its first yield wakes once per 20 ms sleep
  // slice (Channel's futex wait), about 17 times.
  printf("context switches while waiting: %ld\n", switches);
  EXPECT_LT(switches, 40) << "the waiter kept yielding instead of sleeping";
}

}  // namespace
}  // namespace shm
}  // namespace ddpx
