// ProcessGroup's argument checks: every bad call fails its Work at once with
// a message naming the op, what was expected and what came; good calls reach
// the backend, are counted, and use the group's timeout by default.
#include <chrono>
#include <string>
#include <type_traits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process_group/front_end/process_group.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;
using rank_threads::make_groups;
using rank_threads::on_every_rank;

class FrontEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { groups_ = make_groups(2); }
  static void TearDownTestSuite() { groups_.clear(); }

  ProcessGroup& pg0() { return *groups_[0]; }
  ProcessGroup& pg1() { return *groups_[1]; }

  // The error of a Work that must have failed before reaching the backend.
  static std::string error_of(const std::shared_ptr<Work>& work, OpType op) {
    EXPECT_TRUE(work->is_completed()) << "a bad call must fail at once";
    EXPECT_FALSE(work->is_success());
    EXPECT_EQ(work->op(), op);
    EXPECT_EQ(work->exception().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(work->get_future()->status().ok());
    return std::string(work->exception().message());
  }

  static std::vector<std::shared_ptr<ProcessGroup>> groups_;
};
std::vector<std::shared_ptr<ProcessGroup>> FrontEndTest::groups_;

Tensor f32(int64_t n) { return Tensor::zeros({n}, DType::kFloat32); }
Tensor i32(int64_t n) { return Tensor::zeros({n}, DType::kInt32); }

TEST_F(FrontEndTest, AllreduceChecksTheTensorList) {
  EXPECT_EQ(error_of(pg0().allreduce({}), OpType::kAllreduce),
            "allreduce: expected at least one tensor, got none");
  EXPECT_EQ(error_of(pg0().allreduce({Tensor()}), OpType::kAllreduce),
            "allreduce: tensor 0 is undefined (an empty Tensor())");
  EXPECT_EQ(error_of(pg0().allreduce({f32(4), Tensor::zeros({4}, DType::kFloat64)}),
                     OpType::kAllreduce),
            "allreduce: tensor 1 has dtype float64, expected float32 (the dtype of "
            "tensor 0)");
  EXPECT_EQ(error_of(pg0().allreduce({f32(4), f32(3)}), OpType::kAllreduce),
            "allreduce: tensor 1 has 3 elements, expected 4 (the element count of "
            "tensor 0)");
  float host[4];
  Tensor on_gpu = Tensor::from_blob(host, {4}, DType::kFloat32, Device::cuda(0));
  EXPECT_EQ(error_of(pg0().allreduce({f32(4), on_gpu}), OpType::kAllreduce),
            "allreduce: tensor 1 is on cuda:0, expected cpu (the device of tensor 0)");
}

TEST_F(FrontEndTest, BitwiseReduceOpsNeedIntegers) {
  AllreduceOptions band;
  band.op = ReduceOp::BAND;
  EXPECT_EQ(error_of(pg0().allreduce({f32(2)}, band), OpType::kAllreduce),
            "allreduce: ReduceOp BAND is defined on integer dtypes only, got float32");
  AllreduceOptions bxor;
  bxor.op = ReduceOp::BXOR;
  EXPECT_THAT(error_of(pg0().allreduce_coalesced({Tensor::zeros({2}, DType::kBFloat16)}, bxor),
                       OpType::kAllreduceCoalesced),
              HasSubstr("allreduce_coalesced: ReduceOp BXOR is defined on integer "
                        "dtypes only, got bfloat16"));
  ReduceOptions bor;
  bor.op = ReduceOp::BOR;
  EXPECT_THAT(error_of(pg0().reduce({f32(2)}, bor), OpType::kReduce),
              HasSubstr("reduce: ReduceOp BOR"));
  ReduceScatterOptions rs_band;
  rs_band.op = ReduceOp::BAND;
  EXPECT_THAT(error_of(pg0().reduce_scatter_tensor(f32(1), f32(2), rs_band),
                       OpType::kReduceScatterTensor),
              HasSubstr("reduce_scatter_tensor: ReduceOp BAND"));

  // ...and on integers they run, with the right answer.
  std::vector<Tensor> t = {Tensor::from_vector<int32_t>({0b1100, 0b1010}),
                           Tensor::from_vector<int32_t>({0b1010, 0b0110})};
  on_every_rank(2, [&](int r) {
    EXPECT_TRUE(groups_[r]->allreduce({t[r]}, bxor)->wait().ok());
  });
  EXPECT_EQ(t[0].item(0), 0b0110);
  EXPECT_EQ(t[0].item(1), 0b1100);
  EXPECT_EQ(t[1].item(0), 0b0110);
}

TEST_F(FrontEndTest, AllreduceCoalescedAllowsDifferentSizesButOneDtype) {
  EXPECT_THAT(error_of(pg0().allreduce_coalesced({f32(2), i32(2)}),
                       OpType::kAllreduceCoalesced),
              HasSubstr("allreduce_coalesced: tensor 1 has dtype int32, expected float32"));
  std::vector<TensorList> t(2);
  for (int r = 0; r < 2; ++r) {
    t[r] = {Tensor::from_vector<float>({1.f + r}), Tensor::from_vector<float>({2, 3, 4})};
  }
  on_every_rank(2, [&](int r) {
    EXPECT_TRUE(groups_[r]->allreduce_coalesced(t[r])->wait().ok());
  });
  EXPECT_EQ(t[0][0].item(0), 3);
  EXPECT_EQ(t[1][1].item(2), 8);
}

TEST_F(FrontEndTest, RootsMustBeInRange) {
  BroadcastOptions b;
  b.root_rank = 2;
  EXPECT_EQ(error_of(pg0().broadcast({f32(1)}, b), OpType::kBroadcast),
            "broadcast: root_rank 2 is out of range for a group of size 2 (valid: 0..1)");
  b.root_rank = 0;
  b.root_tensor = 1;
  EXPECT_EQ(error_of(pg0().broadcast({f32(1)}, b), OpType::kBroadcast),
            "broadcast: root_tensor 1 is out of range for a group of size 1 (valid: 0..0)");
  ReduceOptions r;
  r.root_rank = -1;
  EXPECT_THAT(error_of(pg0().reduce({f32(1)}, r), OpType::kReduce),
              HasSubstr("reduce: root_rank -1 is out of range"));
  GatherOptions g;
  g.root_rank = 5;
  EXPECT_THAT(error_of(pg0().gather({}, {f32(1)}, g), OpType::kGather),
              HasSubstr("gather: root_rank 5 is out of range"));
  ScatterOptions s;
  s.root_rank = 7;
  EXPECT_THAT(error_of(pg0().scatter({f32(1)}, {}, s), OpType::kScatter),
              HasSubstr("scatter: root_rank 7 is out of range"));
}

TEST_F(FrontEndTest, AllgatherOutputsMustMatchTheInputs) {
  EXPECT_EQ(error_of(pg0().allgather({}, {f32(4)}), OpType::kAllgather),
            "allgather: expected 1 outputs list(s) (one per input tensor), got 0");
  EXPECT_EQ(error_of(pg0().allgather({{f32(4)}}, {f32(4)}), OpType::kAllgather),
            "allgather: outputs[0] holds 1 tensors, expected 2 (one per rank)");
  EXPECT_THAT(error_of(pg0().allgather({{f32(4), i32(4)}}, {f32(4)}), OpType::kAllgather),
              HasSubstr("allgather: outputs[0][1]: expected dtype float32, got int32[4]"));
  EXPECT_THAT(error_of(pg0().allgather({{f32(4), f32(5)}}, {f32(4)}), OpType::kAllgather),
              HasSubstr("allgather: outputs[0][1]: expected 4 elements, got 5"));
  EXPECT_THAT(error_of(pg0().allgather_into_tensor(f32(7), f32(4)),
                       OpType::kAllgatherIntoTensor),
              HasSubstr("allgather_into_tensor: output: expected 8 elements, got 7"));
  EXPECT_THAT(error_of(pg0().allgather_into_tensor(i32(8), f32(4)),
                       OpType::kAllgatherIntoTensor),
              HasSubstr("allgather_into_tensor: output: expected dtype float32, got int32"));
}

TEST_F(FrontEndTest, ReduceScatterInputsMustMatchTheOutputs) {
  EXPECT_THAT(error_of(pg0().reduce_scatter({f32(3)}, {{f32(3)}}), OpType::kReduceScatter),
              HasSubstr("reduce_scatter: inputs[0] holds 1 tensors, expected 2 (one per rank)"));
  EXPECT_THAT(error_of(pg0().reduce_scatter({f32(3)}, {{f32(3), f32(2)}}),
                       OpType::kReduceScatter),
              HasSubstr("reduce_scatter: inputs[0][1]: expected 3 elements, got 2"));
  EXPECT_THAT(error_of(pg0().reduce_scatter_tensor(f32(3), f32(5)),
                       OpType::kReduceScatterTensor),
              HasSubstr("reduce_scatter_tensor: input: expected 6 elements, got 5"));
}

TEST_F(FrontEndTest, GatherAndScatterListsDependOnTheRoot) {
  EXPECT_EQ(error_of(pg1().gather({{f32(1), f32(1)}}, {f32(1)}), OpType::kGather),
            "gather: rank 1 is not the root (0) and must pass no outputs, got 1 list(s)");
  EXPECT_EQ(error_of(pg0().gather({{f32(1)}}, {f32(1)}), OpType::kGather),
            "gather: outputs[0] holds 1 tensors, expected 2 (one per rank)");
  EXPECT_EQ(error_of(pg0().gather({}, {f32(1), f32(1)}), OpType::kGather),
            "gather: expected exactly 1 input tensor, got 2");
  EXPECT_EQ(error_of(pg1().scatter({f32(1)}, {{f32(1), f32(1)}}), OpType::kScatter),
            "scatter: rank 1 is not the root (0) and must pass no inputs, got 1 list(s)");
  EXPECT_THAT(error_of(pg0().scatter({f32(1)}, {{f32(1), f32(2)}}), OpType::kScatter),
              HasSubstr("scatter: inputs[0][1]: expected 1 elements, got 2"));
  EXPECT_EQ(error_of(pg0().scatter({}, {}), OpType::kScatter),
            "scatter: expected exactly 1 output tensor, got 0");
}

TEST_F(FrontEndTest, AlltoallNeedsOneTensorPerRank) {
  EXPECT_EQ(error_of(pg0().alltoall({f32(1), f32(1)}, {f32(1)}), OpType::kAlltoall),
            "alltoall: expected 2 input tensors (one per rank), got 1");
  EXPECT_EQ(error_of(pg0().alltoall({f32(1)}, {f32(1), f32(1)}), OpType::kAlltoall),
            "alltoall: expected 2 output tensors (one per rank), got 1");
  EXPECT_THAT(error_of(pg0().alltoall({f32(1), i32(1)}, {f32(1), f32(1)}), OpType::kAlltoall),
              HasSubstr("alltoall: output 1: expected dtype float32, got int32"));
}

TEST_F(FrontEndTest, AlltoallBaseSplitSizesMustAddUp) {
  Tensor in = Tensor::zeros({4, 2}, DType::kFloat32);
  Tensor out = Tensor::zeros({4, 2}, DType::kFloat32);
  EXPECT_EQ(error_of(pg0().alltoall_base(out, in, {2, 2}, {1, 2}), OpType::kAlltoallBase),
            "alltoall_base: input_split_sizes sum to 3, expected 4 (the first dimension "
            "of float32[4, 2] on cpu)");
  EXPECT_EQ(error_of(pg0().alltoall_base(out, in, {2, 2}, {5, -1}), OpType::kAlltoallBase),
            "alltoall_base: input_split_sizes[1] is -1, expected >= 0");
  EXPECT_EQ(error_of(pg0().alltoall_base(out, in, {4}, {2, 2}), OpType::kAlltoallBase),
            "alltoall_base: output_split_sizes has 1 entries, expected 2 (one per rank)");
  Tensor odd = Tensor::zeros({3}, DType::kFloat32);
  EXPECT_THAT(error_of(pg0().alltoall_base(odd, odd), OpType::kAlltoallBase),
              HasSubstr("has 3 rows, not divisible into 2 equal splits"));
  EXPECT_THAT(error_of(pg0().alltoall_base(i32(4), f32(4)), OpType::kAlltoallBase),
              HasSubstr("alltoall_base: output: expected dtype float32, got int32"));
}

TEST_F(FrontEndTest, PointToPointPeersAndTags) {
  EXPECT_EQ(error_of(pg0().send({f32(1)}, 0), OpType::kSend),
            "send: dst_rank 0 is this rank; a rank cannot send to or receive from itself");
  EXPECT_EQ(error_of(pg0().recv({f32(1)}, 5), OpType::kRecv),
            "recv: src_rank 5 is out of range for a group of size 2 (valid: 0..1)");
  SendRecvOptions neg;
  neg.tag = -3;
  EXPECT_EQ(error_of(pg0().send({f32(1)}, 1, neg), OpType::kSend), "send: tag -3 is negative");
  EXPECT_EQ(error_of(pg0().recv_anysource({}), OpType::kRecvAnysource),
            "recv_anysource: expected at least one tensor, got none");
}

// The only check of a receive from any rank (backends trust the front end).
TEST(FrontEndAlone, RecvAnysourceInAGroupOfOneHasNoPeer) {
  std::vector<std::shared_ptr<ProcessGroup>> alone = make_groups(1);
  std::shared_ptr<Work> w = alone[0]->recv_anysource({f32(1)});
  ASSERT_TRUE(w->is_completed()) << "a bad call must fail at once";
  EXPECT_EQ(w->exception().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w->exception().message(),
            "recv_anysource: a group of size 1 has no other rank to receive from");
}

// Valid point-to-point calls and monitored_barrier reach the backend.
TEST_F(FrontEndTest, ValidPointToPointAndMonitoredBarrierRun) {
  Tensor sent = Tensor::from_vector<double>({1.5, -2});
  Tensor got = Tensor::zeros({2}, DType::kFloat64);
  on_every_rank(2, [&](int r) {
    SendRecvOptions tag;
    tag.tag = 7;
    std::shared_ptr<Work> w =
        r == 0 ? groups_[0]->send({sent}, 1, tag) : groups_[1]->recv({got}, 0, tag);
    EXPECT_TRUE(w->wait().ok()) << w->exception();
    EXPECT_TRUE(groups_[r]->monitored_barrier()->wait().ok());
  });
  EXPECT_EQ(got.item(0), 1.5);
  EXPECT_EQ(got.item(1), -2);
}

TEST_F(FrontEndTest, CountsPayloadOfAdmittedCallsOnly) {
  uint64_t ops = pg0().counters().ops.load();
  uint64_t bytes = pg0().counters().payload_bytes.load();
  pg0().allreduce({f32(4), f32(3)});  // rejected: not counted
  EXPECT_EQ(pg0().counters().ops.load(), ops);
  std::vector<Tensor> t = {f32(1000), f32(1000)};
  on_every_rank(2, [&](int r) { EXPECT_TRUE(groups_[r]->allreduce({t[r]})->wait().ok()); });
  EXPECT_EQ(pg0().counters().ops.load(), ops + 1);
  EXPECT_EQ(pg0().counters().payload_bytes.load(), bytes + 4000);
}

// kUseGroupTimeout becomes the group's timeout: a collective only one rank
// joins fails after the group's 600 ms, and says so.
TEST(FrontEndTimeout, DefaultTimeoutIsTheGroups) {
  // Declared before the groups so it outlives their worker threads: the
  // error's last reference then drops on this thread. (Debian's libabsl_status
  // is not TSan-instrumented, so a last drop on a worker reads as a race.)
  std::shared_ptr<Work> work;
  // The rendezvous gets the default (long) timeout: 600 ms is too tight for
  // it on a loaded machine under ASan. The group under test is a second
  // front end on rank 0's backend whose own timeout is 600 ms.
  auto groups = make_groups(2, "gloo");
  ProcessGroup group(groups[0]->backend(), groups[0]->store(), std::chrono::milliseconds(600));
  EXPECT_EQ(group.timeout(), std::chrono::milliseconds(600));
  auto start = std::chrono::steady_clock::now();
  work = group.allreduce({f32(8)});
  absl::Status s = work->wait();
  auto took = std::chrono::steady_clock::now() - start;
  // The transport's timeout is a DeadlineExceeded naming the op, the
  // timeout and who was waited for (the shared-memory path's rank, or the
  // peer address in Gloo's words).
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("allreduce"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("timed out after 600 ms"));
  EXPECT_LT(took, std::chrono::seconds(10));  // slack for a loaded CI machine
  EXPECT_GE(took, std::chrono::milliseconds(500));
}

// "The group's timeout" and "wait for ever" are told apart by type.
static_assert(!std::is_same_v<std::decay_t<decltype(kUseGroupTimeout)>,
                              std::decay_t<decltype(kNoTimeout)>>);

// An op's timeout, once resolved, must be positive: zero or a negative one
// (kNoTimeout is a wait()'s, not an op's) fails the Work at once.
TEST_F(FrontEndTest, ATimeoutThatIsNotPositiveIsRejected) {
  for (std::chrono::milliseconds bad : {std::chrono::milliseconds(0), kNoTimeout}) {
    AllreduceOptions opts;
    opts.timeout = bad;
    EXPECT_EQ(error_of(pg0().allreduce({f32(4)}, opts), OpType::kAllreduce),
              "allreduce: timeout must be positive, got " + std::to_string(bad.count()) +
                  " ms (leave it unset, kUseGroupTimeout, for the group's)");
    BarrierOptions b;
    b.timeout = bad;
    EXPECT_THAT(error_of(pg0().barrier(b), OpType::kBarrier), HasSubstr("timeout must be"));
  }
}

// An op's own timeout reaches the backend as given; an unset one as the
// group's: a collective only rank 0 joins ends after its own 300 ms.
TEST(FrontEndTimeout, AnOpsOwnTimeoutIsCarriedToTheBackend) {
  std::shared_ptr<Work> work;
  auto groups = make_groups(2, "gloo");
  BarrierOptions opts;
  opts.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  work = groups[0]->barrier(opts);
  absl::Status s = work->wait();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("barrier"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("300 ms"));
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ddpx
