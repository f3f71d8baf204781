// A small allreduce on shared memory begins on the issuing thread
// (GlooBackend::small_allreduce_here): issuing still never waits for peers
// that have not issued their op, ops issued in opposite orders on two groups
// complete, an op nobody waits for completes by itself, and an empty op is
// the same (no op on the channel) whether it begins here or on the worker.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/hash_store.h"
#include "tests/process_group/shm/shm_test_util.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;
using gloo_test::shm_options;
using rank_threads::run_gloo_backends;

// Small enough for the one-pass path of shm_options()'s 4 KiB slots.
Tensor small_filled(int64_t value) {
  Tensor t = Tensor::zeros({16}, DType::kInt64);
  t.fill_(value);
  return t;
}

TEST(SmallAllreduceHere, IssuingDoesNotWaitForAPeerThatHasNotIssued) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_shared_memory()) << b.shared_memory_status();
    Tensor t = small_filled(b.rank() + 1);
    if (b.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const auto t0 = Clock::now();
    std::shared_ptr<Work> work = b.allreduce({t}, {});
    const auto issued = Clock::now() - t0;
    // Rank 0's peer issues 400 ms later: its call returns long before.
    if (b.rank() == 0) {
      EXPECT_LT(issued, std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(work->wait().ok());
    EXPECT_EQ(t.data_as<int64_t>()[15], 3);
  }, shm_options());
}

// The Work holds its future in its own allocation: a future taken from it
// keeps it alive, done and with the op's output, after the Work is dropped.
TEST(SmallAllreduceHere, TheFutureOutlivesItsWork) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    Tensor t = small_filled(b.rank() + 1);
    std::shared_ptr<Future<TensorList>> future;
    {
      std::shared_ptr<Work> work = b.allreduce({t}, {});
      future = work->get_future();
      EXPECT_EQ(future, work->get_future());
    }
    absl::StatusOr<TensorList> out = future->result();
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].data_as<int64_t>()[0], 3);
    EXPECT_TRUE(future->is_completed());
  }, shm_options());
}

// Ops that complete where they were issued may hand out one Work again once
// its caller let go of it: each Work and future still holds its own op's
// output, also while an earlier op's Work is held.
TEST(SmallAllreduceHere, EachWorkHoldsItsOwnOutput) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    std::shared_ptr<Work> held;
    Tensor held_tensor;
    for (int i = 0; i < 50; ++i) {
      Tensor t = small_filled(b.rank() + i);
      std::shared_ptr<Work> work = b.allreduce({t}, {});
      ASSERT_TRUE(work->wait().ok());
      absl::StatusOr<TensorList> out = work->get_future()->result();
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), 1u);
      EXPECT_EQ((*out)[0].data(), t.data()) << "op " << i;
      EXPECT_EQ((*out)[0].data_as<int64_t>()[0], 2 * i + 1) << "op " << i;
      if (i % 7 == 0) {
        held = work;  // kept past the next ops
        held_tensor = t;
      }
      if (held != nullptr && held != work) {
        EXPECT_EQ(held->get_future()->value()[0].data(), held_tensor.data()) << "op " << i;
      }
    }
  }, shm_options());
}

TEST(SmallAllreduceHere, OppositeIssueOrdersOnTwoGroupsComplete) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto g1 = GlooBackend::create(store, r, 2, std::chrono::seconds(20), shm_options());
      auto g2 = GlooBackend::create(store, r, 2, std::chrono::seconds(20), shm_options());
      ASSERT_TRUE(g1.ok() && g2.ok());
      ASSERT_TRUE((*g1)->uses_shared_memory() && (*g2)->uses_shared_memory());
      for (int i = 0; i < 200; ++i) {
        Tensor a = small_filled(i + r), c = small_filled(1000 + i + r);
        // Rank 0 issues on group 1 first, rank 1 on group 2 first; an issue
        // that waited for its peers would deadlock here.
        std::shared_ptr<Work> wa, wc;
        if (r == 0) {
          wa = (*g1)->allreduce({a}, {});
          wc = (*g2)->allreduce({c}, {});
        } else {
          wc = (*g2)->allreduce({c}, {});
          wa = (*g1)->allreduce({a}, {});
        }
        ASSERT_TRUE(wa->wait().ok()) << "iteration " << i;
        ASSERT_TRUE(wc->wait().ok()) << "iteration " << i;
        ASSERT_EQ(a.data_as<int64_t>()[0], 2 * i + 1) << "iteration " << i;
        ASSERT_EQ(c.data_as<int64_t>()[0], 2 * (1000 + i) + 1) << "iteration " << i;
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(SmallAllreduceHere, AnOpNobodyWaitsForCompletesByItself) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    for (int i = 0; i < 20; ++i) {
      Tensor t = small_filled(b.rank() + i);
      // The late rank's peer finds nobody at issue and hands the rest of its
      // op to its worker; neither rank waits on the Work.
      if (b.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::shared_ptr<Work> work = b.allreduce({t}, {});
      const auto t0 = Clock::now();
      while (!work->is_completed() && Clock::now() - t0 < std::chrono::seconds(10)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ASSERT_TRUE(work->is_completed()) << "iteration " << i << " rank " << b.rank();
      ASSERT_TRUE(work->exception().ok()) << work->exception();
      ASSERT_EQ(t.data_as<int64_t>()[0], 2 * i + 1);
    }
  }, shm_options());
}

// One empty tensor takes the path that begins on the issuing thread; two
// (folded locally first, as c10d lets each rank pass its own number) go to
// the worker. Both must agree on whether the empty op is an op on the
// channel, or every later op on it finds its peers out of step.
TEST(SmallAllreduceHere, AnEmptyOpIsTheSameOpOnEitherPath) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_shared_memory()) << b.shared_memory_status();
    TensorList empty = {Tensor::zeros({0}, DType::kInt64)};
    if (b.rank() == 1) empty.push_back(Tensor::zeros({0}, DType::kInt64));
    ASSERT_WORK_OK(b.allreduce(empty, {}));
    // Both workers' channels in turn, through the inline boxes and through
    // the slots.
    for (int i = 0; i < 4; ++i) {
      Tensor box = small_filled(b.rank() + i);
      Tensor slots = Tensor::zeros({400}, DType::kInt64);
      slots.fill_(10 * (b.rank() + i));
      ASSERT_WORK_OK(b.allreduce({box}, {}));
      ASSERT_WORK_OK(b.allreduce({slots}, {}));
      EXPECT_EQ(box.data_as<int64_t>()[15], 2 * i + 1) << "op " << i;
      EXPECT_EQ(slots.data_as<int64_t>()[399], 10 * (2 * i + 1)) << "op " << i;
    }
  }, shm_options());
}

}  // namespace
}  // namespace ddpx
