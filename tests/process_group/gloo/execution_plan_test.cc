// The execution plan (process_group/gloo/execution_plan.h): which paths a
// group has for each collective, in order of choice, and which one an op of
// a given size takes; then the plan real backends make when they form.
#include "process_group/gloo/execution_plan.h"

#include <vector>

#include "gtest/gtest.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/sync_pairs.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using P = Path;
using C = Collective;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

GroupPaths tcp_group(int size) {
  GroupPaths g;
  g.size = size;
  g.sync_pairs = true;
  g.sync_limits = SyncPairLimits{1 * MiB, 8 * MiB};
  return g;
}

TEST(ExecutionPlan, SharedMemoryTakesEveryOpItHasAtEverySize) {
  GroupPaths g = tcp_group(4);
  g.shared_memory = true;
  const ExecutionPlan plan(g);
  for (C op : {C::kAllreduce, C::kBroadcast, C::kReduce, C::kAllgather, C::kReduceScatter,
               C::kAlltoall, C::kBarrier}) {
    EXPECT_EQ(plan.row(op), std::vector<P>{P::kSharedMemory}) << collective_name(op);
    for (size_t n : {size_t{0}, size_t{8}, 64 * MiB}) {
      EXPECT_EQ(plan.choose(op, n), P::kSharedMemory) << collective_name(op) << " " << n;
    }
  }
  // Ops the channel does not have keep the TCP paths.
  EXPECT_EQ(plan.row(C::kGather), (std::vector<P>{P::kSyncPairs, P::kEventLoop}));
  EXPECT_EQ(plan.row(C::kScatter), (std::vector<P>{P::kSyncPairs, P::kEventLoop}));
  EXPECT_TRUE(plan.allreduce_may_begin_here(1));
  EXPECT_FALSE(plan.allreduce_may_begin_here(2));
}

TEST(ExecutionPlan, SyncPairsTakeSmallOpsAndTheEventLoopTheRest) {
  const ExecutionPlan plan(tcp_group(4));
  EXPECT_FALSE(plan.allreduce_may_begin_here(1));
  EXPECT_EQ(plan.row(C::kReduce), std::vector<P>{P::kEventLoop});
  EXPECT_EQ(plan.row(C::kAlltoall), std::vector<P>{P::kEventLoop});
  for (C op : {C::kAllreduce, C::kBroadcast, C::kAllgather, C::kReduceScatter, C::kGather,
               C::kScatter, C::kBarrier}) {
    EXPECT_EQ(plan.row(op), (std::vector<P>{P::kSyncPairs, P::kEventLoop})) << collective_name(op);
  }
  EXPECT_EQ(plan.choose(C::kAllreduce, 8), P::kSyncPairs);
  EXPECT_EQ(plan.choose(C::kAllreduce, 64 * MiB), P::kEventLoop);
  // A broadcast of nothing sends nothing: no path that would wait for it.
  EXPECT_EQ(plan.choose(C::kBroadcast, 0), P::kEventLoop);
  EXPECT_EQ(plan.choose(C::kBroadcast, 8), P::kSyncPairs);
  EXPECT_EQ(plan.choose(C::kBroadcast, 1 * MiB + 1), P::kEventLoop);
  EXPECT_EQ(plan.choose(C::kGather, 1 * MiB), P::kSyncPairs);
  EXPECT_EQ(plan.choose(C::kScatter, 1 * MiB + 1), P::kEventLoop);
  // Halving-doubling up to 128 KiB of input (4 ranks x 32 KiB), the ring beyond.
  EXPECT_EQ(plan.choose(C::kReduceScatter, 32 * KiB), P::kSyncPairs);
  EXPECT_EQ(plan.choose(C::kReduceScatter, 32 * KiB + 4), P::kEventLoop);
  EXPECT_EQ(plan.choose(C::kBarrier, 0), P::kSyncPairs);
  // The allreduce's choice is its TCP plan's.
  for (size_t n : {size_t{8}, 100 * KiB, 8 * MiB, 64 * MiB}) {
    const bool on_sync = plan.tcp_allreduce(n).where != AllreducePlan::Where::kEventLoop;
    EXPECT_EQ(plan.choose(C::kAllreduce, n), on_sync ? P::kSyncPairs : P::kEventLoop) << n;
  }
}

TEST(ExecutionPlan, WithoutSyncPairsOrPeersTheEventLoopTakesAll) {
  GroupPaths no_sync = tcp_group(4);
  no_sync.sync_pairs = false;
  no_sync.sync_limits = {};
  GroupPaths alone = tcp_group(1);
  alone.sync_limits = {};  // one rank agrees on nothing
  for (const GroupPaths& g : {no_sync, alone}) {
    const ExecutionPlan plan(g);
    EXPECT_EQ(plan.row(C::kBarrier), std::vector<P>{P::kEventLoop}) << g.size;
    for (int i = 0; i < kCollectives; ++i) {
      const C op = static_cast<C>(i);
      EXPECT_EQ(plan.choose(op, 8), P::kEventLoop) << collective_name(op) << " " << g.size;
    }
  }
}

TEST(ExecutionPlan, TwoLevelTakesLargeAllreducesOnly) {
  GroupPaths g = tcp_group(4);
  g.two_level = true;
  g.two_level_min_bytes = 1 * MiB;
  const ExecutionPlan plan(g);
  EXPECT_EQ(plan.row(C::kAllreduce),
            (std::vector<P>{P::kTwoLevel, P::kSyncPairs, P::kEventLoop}));
  EXPECT_EQ(plan.choose(C::kAllreduce, 1 * MiB), P::kTwoLevel);
  EXPECT_EQ(plan.choose(C::kAllreduce, 1 * MiB - 4), P::kSyncPairs);
  EXPECT_EQ(plan.row(C::kReduceScatter), (std::vector<P>{P::kSyncPairs, P::kEventLoop}));
}

TEST(ExecutionPlan, ABackendMakesItsPlanWhenTheGroupForms) {
  GlooOptions shm = local_gloo_options();
  shm.shared_memory = true;
  run_gloo_backends(2, [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_shared_memory()) << b.shared_memory_status();
    const ExecutionPlan& plan = b.execution_plan();
    EXPECT_EQ(plan.row(C::kAllreduce), std::vector<P>{P::kSharedMemory}) << plan.str();
    EXPECT_EQ(plan.str().find("allreduce: shared_memory;"), 0u) << plan.str();
  }, shm);
  run_gloo_backends(2, [&](GlooBackend& b) {
    const ExecutionPlan& plan = b.execution_plan();
    EXPECT_EQ(plan.row(C::kBroadcast), (std::vector<P>{P::kSyncPairs, P::kEventLoop}))
        << plan.str();
    EXPECT_EQ(plan.group().sync_limits.max_bytes, b.sync_limits().max_bytes);
    EXPECT_EQ(plan.sync_piece_bytes(), sync_piece_bytes(2, b.sync_limits()));
  });
}

}  // namespace
}  // namespace ddpx
