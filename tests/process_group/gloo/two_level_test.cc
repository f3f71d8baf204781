// The two-level allreduce across hosts, with ranks as threads given host
// identities of their own (GlooOptions::host_identity): topology, exact
// results for every size around the threshold, the same bits on every
// rank, and the flat fallback when hosts have different rank counts.
#include <cstring>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/gloo/two_level_allreduce.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

// Runs body on `hosts.size()` ranks; rank r is on host hosts[r].
void run_on_hosts(const std::vector<int>& hosts, const std::function<void(GlooBackend&)>& body,
                  bool two_level = true) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(30));
  const int n = static_cast<int>(hosts.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o = rank_threads::local_gloo_options();
      o.shared_memory = true;
      o.two_level_allreduce = two_level;
      o.host_identity = "host" + std::to_string(hosts[r]);
      auto b = GlooBackend::create(store, r, n, std::chrono::seconds(30), o);
      ASSERT_TRUE(b.ok()) << b.status();
      body(**b);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(TwoLevel, TopologyAndGroups) {
  run_on_hosts({0, 0, 1, 1, 2, 2}, [](GlooBackend& b) {
    const HostTopology& t = *b.host_topology();
    EXPECT_EQ(t.host_count, 3);
    EXPECT_EQ(t.host_index, b.rank() / 2);
    EXPECT_EQ(t.local_rank, b.rank() % 2);
    EXPECT_EQ(t.local_size, 2);
    EXPECT_TRUE(t.uniform());
    EXPECT_TRUE(b.uses_two_level_allreduce());
    EXPECT_FALSE(b.uses_shared_memory());  // the whole group spans hosts
  });
}

TEST(TwoLevel, ExactAroundTheThresholdAndAcrossPiecesForSeveralOps) {
  const int64_t min_elements = (256 << 10) / 4;
  // Two and a bit pipelined pieces: whole pieces in place, a padded last one.
  const int64_t piece_elements = TwoLevelAllreduce::kPieceBytes / 4;
  run_on_hosts({0, 0, 1, 1}, [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_two_level_allreduce());
    for (int64_t count : {int64_t{1000}, min_elements - 1, min_elements, min_elements * 3 + 7,
                          piece_elements * 2, piece_elements * 2 + 7}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::AVG}) {
        Tensor t = Tensor::zeros({count}, DType::kInt32);
        for (int64_t i = 0; i < count; ++i) t.data_as<int32_t>()[i] = static_cast<int32_t>(i % 97 + 4 * b.rank());
        AllreduceOptions o;
        o.op = op;
        ASSERT_TRUE(b.allreduce({t}, o)->wait().ok());
        for (int64_t i = 0; i < count; ++i) {
          const int32_t base = static_cast<int32_t>(i % 97);
          const int32_t want = op == ReduceOp::SUM ? 4 * base + 24
                               : op == ReduceOp::MAX ? base + 12
                                                     : (4 * base + 24) / 4;
          ASSERT_EQ(t.data_as<int32_t>()[i], want) << reduce_op_name(op) << " count " << count << " i " << i;
        }
      }
    }
  });
}

TEST(TwoLevel, RandomFloatsGiveTheSameBitsOnEveryRankAndMatchFlatWithinRounding) {
  const int64_t count = 300001;
  std::vector<std::vector<float>> two(6), flat(6);
  for (bool two_level : {true, false}) {
    run_on_hosts({0, 0, 1, 1, 2, 2}, [&](GlooBackend& b) {
      ASSERT_EQ(b.uses_two_level_allreduce(), two_level);
      std::mt19937 gen(7 + b.rank());
      std::uniform_real_distribution<float> dist(-1, 1);
      Tensor t = Tensor::zeros({count}, DType::kFloat32);
      for (int64_t i = 0; i < count; ++i) t.data_as<float>()[i] = dist(gen);
      ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
      (two_level ? two : flat)[b.rank()].assign(t.data_as<float>(), t.data_as<float>() + count);
    }, two_level);
  }
  for (int r = 1; r < 6; ++r) {
    ASSERT_EQ(0, memcmp(two[0].data(), two[r].data(), count * 4)) << "rank " << r;
  }
  for (int64_t i = 0; i < count; ++i) ASSERT_NEAR(two[0][i], flat[0][i], 1e-5) << i;
}

TEST(TwoLevel, HostsWithDifferentRankCountsStayFlat) {
  run_on_hosts({0, 0, 1}, [](GlooBackend& b) {
    EXPECT_FALSE(b.host_topology()->uniform());
    EXPECT_FALSE(b.uses_two_level_allreduce());
    Tensor t = Tensor::zeros({100000}, DType::kInt64);
    t.fill_(b.rank() + 1);
    ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
    EXPECT_EQ(t.data_as<int64_t>()[99999], 6);
  });
}

TEST(TwoLevel, EnvironmentSwitch) {
  setenv("DDPX_GLOO_TWO_LEVEL", "0", 1);
  EXPECT_FALSE(GlooOptions::from_env()->two_level_allreduce);
  setenv("DDPX_GLOO_TWO_LEVEL", "yes", 1);
  auto bad = GlooOptions::from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DDPX_GLOO_TWO_LEVEL"), std::string::npos);
  unsetenv("DDPX_GLOO_TWO_LEVEL");
  EXPECT_TRUE(GlooOptions::from_env()->two_level_allreduce);
}

}  // namespace
}  // namespace ddpx
