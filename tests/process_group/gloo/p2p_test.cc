// send / recv / recv_anysource and monitored_barrier.
#include <atomic>

#include "gtest/gtest.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::run_gloo_backends;
using rank_threads::wait_ok;

class P2PTest : public ::testing::TestWithParam<int> {};

TEST_P(P2PTest, SendRecvAroundTheRing) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  run_gloo_backends(size, [&](GlooBackend& b) {
    const int next = (b.rank() + 1) % size;
    const int prev = (b.rank() + size - 1) % size;
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt64}) {
      Tensor out = Tensor::zeros({17}, dtype);
      out.fill_(b.rank() + 1);
      Tensor in = Tensor::zeros({17}, dtype);
      SendRecvOptions opts;
      opts.tag = 7;
      // Both posted before either is waited for: no deadlock.
      auto r = b.recv({in}, prev, opts);
      auto s = b.send({out}, next, opts);
      ASSERT_WORK_OK(s);
      ASSERT_WORK_OK(r);
      EXPECT_EQ(r->source_rank(), prev);
      for (int64_t i = 0; i < 17; ++i) ASSERT_EQ(in.item(i), prev + 1);
    }
    Tensor empty = Tensor::zeros({0}, DType::kFloat32);
    ASSERT_WORK_OK(b.send({empty}, next, {}));
    ASSERT_WORK_OK(b.recv({empty}, prev, {}));
  });
}

TEST_P(P2PTest, TagsKeepMessagesApart) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  run_gloo_backends(size, [&](GlooBackend& b) {
    if (b.rank() == 0) {
      Tensor a = Tensor::zeros({4}, DType::kInt32), c = Tensor::zeros({4}, DType::kInt32);
      SendRecvOptions ta, tc;
      ta.tag = 1;
      tc.tag = 2;
      auto wa = b.recv({a}, 1, ta);
      auto wc = b.recv({c}, 1, tc);
      ASSERT_WORK_OK(wa);
      ASSERT_WORK_OK(wc);
      EXPECT_EQ(a.item(0), 111);
      EXPECT_EQ(c.item(0), 222);
    } else if (b.rank() == 1) {
      // Sent in the opposite order of the receives.
      Tensor a = Tensor::zeros({4}, DType::kInt32), c = Tensor::zeros({4}, DType::kInt32);
      a.fill_(111);
      c.fill_(222);
      SendRecvOptions ta, tc;
      ta.tag = 1;
      tc.tag = 2;
      auto wc = b.send({c}, 0, tc);
      auto wa = b.send({a}, 0, ta);
      ASSERT_WORK_OK(wc);
      ASSERT_WORK_OK(wa);
    }
  });
}

TEST_P(P2PTest, RecvAnysourceReportsTheSender) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  run_gloo_backends(size, [&](GlooBackend& b) {
    if (b.rank() == 0) {
      std::vector<bool> seen(size, false);
      for (int k = 1; k < size; ++k) {
        Tensor t = Tensor::zeros({3}, DType::kFloat64);
        auto w = b.recv_anysource({t}, {});
        ASSERT_WORK_OK(w);
        const int src = w->source_rank();
        ASSERT_GE(src, 1);
        ASSERT_LT(src, size);
        EXPECT_EQ(t.item(0), 100 + src) << "payload must come from the reported rank";
        EXPECT_FALSE(seen[src]);
        seen[src] = true;
      }
    } else {
      Tensor t = Tensor::zeros({3}, DType::kFloat64);
      t.fill_(100 + b.rank());
      ASSERT_WORK_OK(b.send({t}, 0, {}));
    }
  });
}

TEST_P(P2PTest, MonitoredBarrierPassesWhenEveryoneArrives) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (int i = 0; i < 3; ++i) ASSERT_WORK_OK(b.monitored_barrier({}, i % 2 == 0));
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, P2PTest, ::testing::Range(1, 6));

TEST(MonitoredBarrier, NamesEveryMissingRankWithWaitAll) {
  std::atomic<int> done{0};
  run_gloo_backends(4, [&](GlooBackend& b) {
    if (b.rank() >= 2) {
      // Ranks 2 and 3 never arrive (but stay alive until the others finish).
      while (done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    BarrierOptions opts;
    opts.timeout = std::chrono::milliseconds(300);
    absl::Status s = wait_ok(b.monitored_barrier(opts, /*wait_all_ranks=*/true));
    done.fetch_add(1);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("ranks 2, 3"), std::string::npos) << s;
    EXPECT_NE(s.message().find("300 ms"), std::string::npos) << s;
  });
}

TEST(MonitoredBarrier, NamesTheFirstMissingRank) {
  std::atomic<int> done{0};
  run_gloo_backends(4, [&](GlooBackend& b) {
    if (b.rank() == 1 || b.rank() == 3) {
      while (done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    BarrierOptions opts;
    opts.timeout = std::chrono::milliseconds(300);
    absl::Status s = wait_ok(b.monitored_barrier(opts, /*wait_all_ranks=*/false));
    done.fetch_add(1);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 1 has not arrived"), std::string::npos) << s;
    EXPECT_EQ(s.message().find("3"), s.message().find("300 ms")) << s;
  });
}

}  // namespace
}  // namespace ddpx
