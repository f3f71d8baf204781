// Debug mode (DDPX_DISTRIBUTED_DEBUG=DETAIL): ranks that call mismatched
// collectives all fail with a message naming the ranks and what differs,
// instead of hanging or mixing data; matching calls still run correctly.
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process_group/front_end/debug_check.h"
#include "process_group/front_end/process_group.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;
using rank_threads::make_groups;
using rank_threads::on_every_rank;

constexpr int kRanks = 3;

class DebugModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("DDPX_DISTRIBUTED_DEBUG", "DETAIL", 1);
    groups_ = make_groups(kRanks, "gloo", std::chrono::seconds(10));
    unsetenv("DDPX_DISTRIBUTED_DEBUG");
  }

  // Runs call(rank) on every rank at once; returns each rank's result.
  std::vector<absl::Status> run(
      const std::function<std::shared_ptr<Work>(ProcessGroup&, int rank)>& call) {
    std::vector<absl::Status> out(kRanks);
    on_every_rank(kRanks, [&](int r) { out[r] = call(*groups_[r], r)->wait(); });
    return out;
  }

  std::vector<std::shared_ptr<ProcessGroup>> groups_;
};

TEST_F(DebugModeTest, MatchingCollectivesRunNormally) {
  ASSERT_TRUE(groups_[0]->debug_detail());
  std::vector<Tensor> t(kRanks);
  for (int r = 0; r < kRanks; ++r) t[r] = Tensor::from_vector<float>({1.f * r, 2});
  for (const absl::Status& s : run([&](ProcessGroup& pg, int r) { return pg.allreduce({t[r]}); })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(t[2].item(0), 0 + 1 + 2);
  EXPECT_EQ(t[2].item(1), 6);
  for (const absl::Status& s : run([](ProcessGroup& pg, int) { return pg.barrier(); })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST_F(DebugModeTest, ShapeMismatchFailsEveryRankNamingTheRanks) {
  std::vector<absl::Status> s = run([](ProcessGroup& pg, int r) {
    return pg.allreduce({Tensor::zeros({r == 1 ? 5 : 4}, DType::kFloat32)});
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(s[r].code(), absl::StatusCode::kInvalidArgument) << s[r];
    EXPECT_THAT(std::string(s[r].message()), HasSubstr("collective #0 (allreduce)"));
    EXPECT_THAT(std::string(s[r].message()), HasSubstr("shapes mismatch (ranks 0,2: [[4]]; rank 1: [[5]])"));
  }
  // The sequence stays in step: the next matching call works.
  std::vector<Tensor> t(kRanks);
  for (int r = 0; r < kRanks; ++r) t[r] = Tensor::from_vector<int32_t>({r});
  for (const absl::Status& st : run([&](ProcessGroup& pg, int r) { return pg.allreduce({t[r]}); })) {
    EXPECT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(t[0].item(0), 3);
}

TEST_F(DebugModeTest, DifferentOpsAreNamed) {
  std::vector<absl::Status> s = run([](ProcessGroup& pg, int r) -> std::shared_ptr<Work> {
    Tensor t = Tensor::zeros({4}, DType::kFloat32);
    if (r == 2) return pg.broadcast({t});
    return pg.allreduce({t});
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(std::string(s[r].message()),
                HasSubstr("op mismatch (ranks 0,1: allreduce; rank 2: broadcast)"))
        << s[r];
  }
}

TEST_F(DebugModeTest, DtypeRootAndReduceOpMismatches) {
  std::vector<absl::Status> s = run([](ProcessGroup& pg, int r) {
    return pg.allreduce({Tensor::zeros({4}, r == 0 ? DType::kFloat64 : DType::kFloat32)});
  });
  EXPECT_THAT(std::string(s[1].message()),
              HasSubstr("dtypes mismatch (rank 0: [float64]; ranks 1,2: [float32])"));

  s = run([](ProcessGroup& pg, int r) {
    BroadcastOptions o;
    o.root_rank = r == 1 ? 1 : 0;
    return pg.broadcast({Tensor::zeros({4}, DType::kFloat32)}, o);
  });
  EXPECT_THAT(std::string(s[0].message()), HasSubstr("root mismatch (ranks 0,2: 0; rank 1: 1)"));

  s = run([](ProcessGroup& pg, int r) {
    AllreduceOptions o;
    o.op = r == 2 ? ReduceOp::MAX : ReduceOp::SUM;
    return pg.allreduce({Tensor::zeros({4}, DType::kFloat32)}, o);
  });
  EXPECT_THAT(std::string(s[2].message()), HasSubstr("reduce_op mismatch (ranks 0,1: SUM; rank 2: MAX)"));
}

TEST_F(DebugModeTest, MissingRankIsNamedAfterTheTimeout) {
  std::vector<absl::Status> s(kRanks);
  on_every_rank(kRanks, [&](int r) {
    if (r == 1) return;  // rank 1 never calls
    AllreduceOptions o;
    o.timeout = std::chrono::milliseconds(300);
    s[r] = groups_[r]->allreduce({Tensor::zeros({4}, DType::kFloat32)}, o)->wait();
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(s[r].code(), absl::StatusCode::kDeadlineExceeded) << s[r];
    EXPECT_THAT(std::string(s[r].message()),
                HasSubstr("ranks [1] did not reach this collective within 300 ms"));
  }
}

TEST_F(DebugModeTest, KeysAreRemovedOnceEveryoneHasLooked) {
  auto keys_before = groups_[0]->store()->num_keys();
  ASSERT_TRUE(keys_before.ok());
  for (int i = 0; i < 5; ++i) {
    run([](ProcessGroup& pg, int) { return pg.barrier(); });
  }
  EXPECT_EQ(*groups_[0]->store()->num_keys(), *keys_before);
}

TEST(DebugModeOff, NotEnabledWithoutTheVariable) {
  unsetenv("DDPX_DISTRIBUTED_DEBUG");
  EXPECT_FALSE(debug_detail_from_env());
  setenv("DDPX_DISTRIBUTED_DEBUG", "detail", 1);
  EXPECT_TRUE(debug_detail_from_env());
  setenv("DDPX_DISTRIBUTED_DEBUG", "INFO", 1);
  EXPECT_FALSE(debug_detail_from_env());
  unsetenv("DDPX_DISTRIBUTED_DEBUG");
  auto groups = make_groups(1);
  EXPECT_FALSE(groups[0]->debug_detail());
}

TEST(Fingerprint, EncodesAndDecodes) {
  CollectiveFingerprint fp(OpType::kReduce);
  fp.tensors({Tensor::zeros({2, 3}, DType::kInt8)}).root(1).reduce_op(ReduceOp::MIN);
  auto fields = CollectiveFingerprint::decode(fp.encode());
  ASSERT_EQ(fields.size(), 5u);
  EXPECT_EQ(fields[0], std::make_pair(std::string("op"), std::string("reduce")));
  EXPECT_EQ(fields[1].second, "[int8]");
  EXPECT_EQ(fields[2].second, "[[2, 3]]");
  EXPECT_EQ(fields[3].second, "1");
  EXPECT_EQ(fields[4].second, "MIN");
}

// Up to four tensors of up to four dimensions are kept as plain data, more
// as text at once: both read the same.
TEST(Fingerprint, ListsPastThePlainDataReadTheSame) {
  std::vector<Tensor> five(5, Tensor::zeros({2}, DType::kFloat32));
  five[4] = Tensor::zeros({3}, DType::kInt32);
  CollectiveFingerprint many(OpType::kAllreduceCoalesced);
  many.tensors(five);
  EXPECT_EQ(many.fields()[1].second, "[float32, float32, float32, float32, int32]");
  EXPECT_EQ(many.fields()[2].second, "[[2], [2], [2], [2], [3]]");
  EXPECT_EQ(many.trace().ntensors, 5);

  CollectiveFingerprint deep(OpType::kBroadcast);
  deep.tensors({Tensor::zeros({1, 2, 1, 2, 1}, DType::kUInt8), Tensor::zeros({4}, DType::kUInt8)});
  EXPECT_EQ(deep.fields()[2].second, "[[1, 2, 1, 2, 1], [4]]");

  CollectiveFingerprint alltoall(OpType::kAlltoall);
  alltoall.dtypes({Tensor::zeros({7}, DType::kFloat64)});
  ASSERT_EQ(alltoall.fields().size(), 2u);
  EXPECT_EQ(alltoall.encode(), "op=alltoall\ndtypes=[float64]\n");
}

}  // namespace
}  // namespace ddpx
