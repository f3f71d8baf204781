// A rank that leaves or goes silent makes the others fail within their
// timeout, with a message naming the op and the timeout; bad construction
// arguments are clear errors.
#include <atomic>

#include "gtest/gtest.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;
using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using rank_threads::wait_ok;

TEST(GlooFaults, SilentRankMakesOthersTimeOutNamingOpAndTimeout) {
  // Rank 2 is alive and connected but never joins the allreduce.
  auto outcomes = gloo_test::run_with_a_silent_rank(3, [](GlooBackend& b) {
    AllreduceOptions opts;
    opts.timeout = std::chrono::milliseconds(400);
    return b.allreduce({Tensor::zeros({1000}, DType::kFloat32)}, opts);
  }, local_gloo_options(), std::chrono::seconds(20));
  // A rank may instead see the other joiner close its connection when that
  // one timed out: a timeout too if that came after its own had passed.
  int timed_out = 0;
  for (const gloo_test::OpOutcome& o : outcomes) {
    const absl::Status& s = o.status;
    ASSERT_FALSE(s.ok());
    // The op and its tensors, described only now that it failed.
    EXPECT_NE(s.message().find("allreduce of float32[1000] on rank"), std::string::npos) << s;
    EXPECT_NE(s.message().find("400 ms"), std::string::npos) << s;
    EXPECT_LT(o.elapsed, std::chrono::milliseconds(3000));
    if (s.code() == absl::StatusCode::kUnavailable) {
      EXPECT_NE(s.message().find("Connection closed"), std::string::npos) << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("timed out after 400 ms"), std::string::npos) << s;
    ++timed_out;
  }
  EXPECT_GE(timed_out, 1);
}

TEST(GlooFaults, RankThatExitsMakesOthersFailWithinTimeout) {
  std::atomic<bool> first_done{false};
  run_gloo_backends(3, [&](GlooBackend& b) {
    BarrierOptions bopts;
    ASSERT_WORK_OK(b.barrier(bopts));
    if (b.rank() == 1) return;  // leaves: its backend closes every connection
    Tensor t = Tensor::zeros({1 << 16}, DType::kFloat32);
    BroadcastOptions opts;
    opts.timeout = std::chrono::milliseconds(2000);
    auto start = Clock::now();
    absl::Status s;
    // The first broadcast may still race the departure; keep going until one
    // fails, which must happen well within the timeout of one op.
    for (int i = 0; i < 50 && s.ok(); ++i) s = wait_ok(b.broadcast({t}, opts));
    auto elapsed = Clock::now() - start;
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("broadcast"), std::string::npos) << s;
    EXPECT_NE(s.message().find("2000 ms"), std::string::npos) << s;
    EXPECT_LT(elapsed, std::chrono::milliseconds(2000 + 1500)) << s;
    (void)first_done;
  });
}

TEST(GlooFaults, PerOpTimeoutAppliesToPointToPoint) {
  run_gloo_backends(2, [&](GlooBackend& b) {
    if (b.rank() != 0) return;
    Tensor t = Tensor::zeros({4}, DType::kInt8);
    SendRecvOptions opts;
    opts.timeout = std::chrono::milliseconds(200);
    auto start = Clock::now();
    absl::Status s = wait_ok(b.recv({t}, 1, opts));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("recv"), std::string::npos) << s;
    EXPECT_NE(s.message().find("200 ms"), std::string::npos) << s;
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(3000));
  });
}

TEST(GlooFaults, BadArgumentsAreClearErrors) {
  auto store = std::make_shared<HashStore>();
  auto a = GlooBackend::create(store, 3, 2, std::chrono::seconds(1), local_gloo_options());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("rank 3"), std::string::npos) << a.status();
  auto b = GlooBackend::create(store, 0, 1, std::chrono::milliseconds(0), local_gloo_options());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("timeout"), std::string::npos) << b.status();
  auto c = GlooBackend::create(nullptr, 0, 1, std::chrono::seconds(1), local_gloo_options());
  EXPECT_FALSE(c.ok());
}

TEST(GlooFaults, RendezvousWithAMissingPeerTimesOut) {
  auto store = std::make_shared<HashStore>(std::chrono::milliseconds(300));
  auto start = Clock::now();
  auto b = GlooBackend::create(store, 0, 2, std::chrono::milliseconds(300), local_gloo_options());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("rendezvous"), std::string::npos) << b.status();
  EXPECT_NE(b.status().message().find("300 ms"), std::string::npos) << b.status();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(5000));
}

TEST(GlooOptionsEnv, MalformedVariablesAreNamed) {
  setenv("DDPX_GLOO_NUM_WORKERS", "zero", 1);
  auto o = GlooOptions::from_env();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("DDPX_GLOO_NUM_WORKERS"), std::string::npos);
  unsetenv("DDPX_GLOO_NUM_WORKERS");
  setenv("DDPX_GLOO_ALLREDUCE_ALGORITHM", "tree", 1);
  o = GlooOptions::from_env();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("tree"), std::string::npos);
  unsetenv("DDPX_GLOO_ALLREDUCE_ALGORITHM");
  setenv("DDPX_GLOO_HOSTNAME", "127.0.0.1", 1);
  o = GlooOptions::from_env();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->hostname, "127.0.0.1");
  unsetenv("DDPX_GLOO_HOSTNAME");
}

}  // namespace
}  // namespace ddpx
