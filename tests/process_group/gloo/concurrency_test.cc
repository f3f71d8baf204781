// Many ops in flight at once never cross: each gets its own tag and runs on
// the worker that owns its context.
#include <thread>

#include "gtest/gtest.h"
#include "store/prefix_store.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using rank_threads::wait_ok;

TEST(GlooConcurrency, ManyOpsInFlightKeepTheirOwnData) {
  for (int size : {2, 3}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      constexpr int kOps = 60;
      TensorList tensors;
      std::vector<std::shared_ptr<Work>> works;
      for (int k = 0; k < kOps; ++k) {
        // Different sizes, so a crossed message would also be a size error.
        Tensor t = Tensor::zeros({1 + 97 * k}, DType::kFloat32);
        t.fill_(k * 100 + b.rank());
        tensors.push_back(t);
        if (k % 3 == 2) {
          BroadcastOptions opts;
          opts.root_rank = k % size;
          works.push_back(b.broadcast({t}, opts));
        } else {
          works.push_back(b.allreduce({t}, {}));
        }
      }
      for (auto& w : works) ASSERT_WORK_OK(w);
      for (int k = 0; k < kOps; ++k) {
        double want = k % 3 == 2 ? k * 100 + (k % size)
                                 : size * k * 100.0 + size * (size - 1) / 2.0;
        ASSERT_EQ(tensors[k].item(0), want) << "op " << k;
        ASSERT_EQ(tensors[k].item(tensors[k].numel() - 1), want) << "op " << k;
      }
    }, local_gloo_options(/*num_workers=*/3));
  }
}

// wait() may run an op on the waiting thread (when its worker is idle and it
// is next there); ops nobody waits for yet still run on their workers. Mixed
// together, every op keeps its own data and order.
TEST(GlooConcurrency, WaitedAndUnwaitedOpsInterleave) {
  for (int size : {2, 3}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (int i = 0; i < 30; ++i) {
        Tensor pending = Tensor::zeros({5000 + i}, DType::kInt32);
        pending.fill_(i + b.rank());
        auto in_flight = b.allreduce({pending}, {});  // left running
        Tensor now = Tensor::zeros({3 + i}, DType::kInt64);
        now.fill_(1000 * i + b.rank());
        ASSERT_WORK_OK(b.allreduce({now}, {}));  // waited at once
        ASSERT_EQ(now.item(2 + i), size * 1000.0 * i + size * (size - 1) / 2.0);
        if (i % 2 == 0) ASSERT_WORK_OK(in_flight);
        // With 2 workers this one shares a worker with `in_flight` and
        // must wait behind it when that is still queued or running.
        ASSERT_WORK_OK(b.barrier({}));
        ASSERT_WORK_OK(in_flight);
        ASSERT_EQ(pending.item(4999 + i), size * i + size * (size - 1) / 2.0);
      }
    });
  }
}

TEST(GlooConcurrency, ThreadsWithTheirOwnGroupsRunSideBySide) {
  // Per rank, three threads each drive their own backend (own store prefix),
  // all at once.
  constexpr int kSize = 3, kThreads = 3;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<Store>> prefixed_stores;
  for (int i = 0; i < kSize * kThreads; ++i) {
    prefixed_stores.push_back(
        std::make_shared<PrefixStore>("group" + std::to_string(i % kThreads), store));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    for (int g = 0; g < kThreads; ++g) {
      threads.emplace_back([&, r, g] {
        std::shared_ptr<Store> prefixed = prefixed_stores[r * kThreads + g];
        auto b = GlooBackend::create(prefixed, r, kSize, std::chrono::seconds(20), local_gloo_options(1));
        ASSERT_TRUE(b.ok()) << b.status();
        for (int i = 0; i < 20; ++i) {
          Tensor t = Tensor::zeros({1000 + g}, DType::kInt64);
          t.fill_(g * 1000 + i);
          ASSERT_WORK_OK((*b)->allreduce({t}, {}));
          ASSERT_EQ(t.item(999 + g), kSize * (g * 1000 + i));
        }
        // As with torch: a group whose peers may still be finishing their
        // last op is left after a barrier.
        ASSERT_WORK_OK((*b)->barrier({}));
      });
    }
  }
  for (auto& t : threads) t.join();
}

TEST(GlooConcurrency, DestroyingTheBackendCancelsQueuedWork) {
  std::shared_ptr<Work> stuck;
  run_gloo_backends(2, [&](GlooBackend& b) {
    if (b.rank() == 0) return;
    // Rank 0 is gone: this op fails (peer closed) or is cancelled on
    // destruction; either way it completes, it does not hang.
    Tensor t = Tensor::zeros({8}, DType::kFloat32);
    AllreduceOptions opts;
    opts.timeout = std::chrono::milliseconds(500);
    stuck = b.allreduce({t}, opts);
  });
  ASSERT_NE(stuck, nullptr);
  EXPECT_TRUE(stuck->is_completed());
  EXPECT_FALSE(stuck->is_success());
}

}  // namespace
}  // namespace ddpx
