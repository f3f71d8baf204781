// The nccl backend's plain-C++ bookkeeping: dtype/op tables, device sets,
// communicator plans and store keys, alltoall splits, options.
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "process_group/nccl/alltoall_plan.h"
#include "process_group/nccl/comm_plan.h"
#include "process_group/nccl/nccl_options.h"
#include "process_group/nccl/nccl_types.h"

namespace ddpx {
namespace nccl {
namespace {

bool mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// CUDA tensors without CUDA: caller-owned "memory" is never touched here.
Tensor fake_cuda(int device, Shape shape = {4}, DType dtype = DType::kFloat32) {
  static char dummy[1];
  return Tensor::from_blob(dummy, shape, dtype, Device::cuda(device));
}

TEST(NcclTypes, EveryDTypeHasItsNcclType) {
  EXPECT_EQ(data_type(DType::kFloat32), DataType::kFloat32);
  EXPECT_EQ(data_type(DType::kFloat16), DataType::kFloat16);
  EXPECT_EQ(data_type(DType::kBFloat16), DataType::kBfloat16);
  EXPECT_EQ(data_type(DType::kFloat64), DataType::kFloat64);
  EXPECT_EQ(data_type(DType::kInt8), DataType::kInt8);
  EXPECT_EQ(data_type(DType::kUInt8), DataType::kUint8);
  EXPECT_EQ(data_type(DType::kInt32), DataType::kInt32);
  EXPECT_EQ(data_type(DType::kInt64), DataType::kInt64);
}

TEST(NcclTypes, ReduceOpsMapAndAvgIsNcclAvg) {
  EXPECT_EQ(*reduce_op(ReduceOp::SUM, DType::kFloat32), RedOp::kSum);
  EXPECT_EQ(*reduce_op(ReduceOp::AVG, DType::kFloat32), RedOp::kAvg);
  EXPECT_EQ(*reduce_op(ReduceOp::PRODUCT, DType::kInt32), RedOp::kProd);
  EXPECT_EQ(*reduce_op(ReduceOp::MIN, DType::kFloat16), RedOp::kMin);
  EXPECT_EQ(*reduce_op(ReduceOp::MAX, DType::kBFloat16), RedOp::kMax);
}

TEST(NcclTypes, BitwiseOpsAreRejectedByName) {
  for (ReduceOp op : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    absl::StatusOr<RedOp> r = reduce_op(op, DType::kInt32);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_TRUE(mentions(r.status(), reduce_op_name(op))) << r.status();
    EXPECT_TRUE(mentions(r.status(), "no bitwise reductions")) << r.status();
    EXPECT_TRUE(mentions(r.status(), "int32")) << r.status();
  }
}

TEST(DeviceSets, TensorsOnDistinctCudaDevices) {
  absl::StatusOr<DeviceSet> set = device_set_of(OpType::kAllreduce, {fake_cuda(1), fake_cuda(0)});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->devices, (std::vector<int>{1, 0}));
  EXPECT_EQ(set->key(), "1,0");
}

TEST(DeviceSets, CpuTensorsDuplicatesAndEmptyListsAreErrors) {
  absl::Status cpu =
      device_set_of(OpType::kBroadcast, {fake_cuda(0), Tensor::zeros({4}, DType::kFloat32)})
          .status();
  EXPECT_TRUE(mentions(cpu, "broadcast: the nccl backend needs CUDA tensors, tensor 1")) << cpu;
  absl::Status dup = device_set_of(OpType::kAllreduce, {fake_cuda(2), fake_cuda(2)}).status();
  EXPECT_TRUE(mentions(dup, "at most one tensor per device")) << dup;
  EXPECT_TRUE(mentions(device_set_of(OpType::kReduce, {}).status(), "reduce: no tensors"));
  absl::Status two = single_device_of(OpType::kAllgather, {fake_cuda(0), fake_cuda(1)}).status();
  EXPECT_TRUE(mentions(two, "allgather: the nccl backend takes one tensor")) << two;
}

TEST(CommPlans, CollectiveRanksAreRankMajorOverDevices) {
  DeviceSet two{{0, 1}};
  CommPlan plan = collective_plan(two, /*rank=*/2, /*size=*/3);
  EXPECT_EQ(plan.key, "devices:0,1");
  EXPECT_EQ(plan.nranks, 6);
  EXPECT_EQ(plan.nccl_ranks, (std::vector<int>{4, 5}));
  EXPECT_FALSE(plan.creates_unique_id);
  EXPECT_TRUE(collective_plan(two, 0, 3).creates_unique_id);
  EXPECT_EQ(nccl_root(/*root_rank=*/1, /*root_tensor=*/1, 2), 3);
}

TEST(CommPlans, PointToPointPairsAgreeOnOneKeyAndOneCreator) {
  CommPlan a = p2p_plan(/*device=*/0, /*rank=*/3, /*peer=*/1);
  CommPlan b = p2p_plan(0, 1, 3);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.key, "p2p:1:3:device:0");
  EXPECT_EQ(a.pair, "p2p:1:3");
  EXPECT_EQ(a.nranks, 2);
  EXPECT_EQ(a.nccl_ranks, (std::vector<int>{1}));
  EXPECT_EQ(b.nccl_ranks, (std::vector<int>{0}));
  EXPECT_TRUE(b.creates_unique_id);
  EXPECT_FALSE(a.creates_unique_id);
  EXPECT_NE(p2p_plan(1, 1, 3).key, a.key) << "another device is another communicator";
}

TEST(CommPlans, RanksOnDifferentDevicesMeetUnderOneStoreKey) {
  // Rank 0 on cuda:0 and rank 1 on cuda:1 (the usual one GPU per process):
  // different cache keys, one rendezvous key.
  CommPlan r0 = collective_plan(DeviceSet{{0}}, 0, 2);
  CommPlan r1 = collective_plan(DeviceSet{{1}}, 1, 2);
  EXPECT_NE(r0.key, r1.key);
  EXPECT_EQ(rendezvous_store_key(r0, 0, 0), rendezvous_store_key(r1, 0, 0));
  EXPECT_EQ(rendezvous_store_key(r0, 0, 0), "nccl/collective:0/0/unique_id");
  EXPECT_EQ(rendezvous_store_key(r0, 1, 0), "nccl/collective:1/0/unique_id");
  CommPlan s = p2p_plan(/*device=*/0, /*rank=*/0, /*peer=*/1);
  CommPlan r = p2p_plan(/*device=*/1, /*rank=*/1, /*peer=*/0);
  EXPECT_NE(s.key, r.key);
  EXPECT_EQ(rendezvous_store_key(s, -1, 0), rendezvous_store_key(r, -1, 0));
  EXPECT_EQ(rendezvous_store_key(s, -1, 2), "nccl/p2p:0:1/2/unique_id");
}

TEST(CommPlans, StoreKeysSeparateCommunicatorsAndGenerations) {
  EXPECT_EQ(unique_id_store_key("p2p:0:1", 0), "nccl/p2p:0:1/0/unique_id");
  EXPECT_NE(unique_id_store_key("p2p:0:1", 1), unique_id_store_key("p2p:0:1", 0));
  EXPECT_NE(unique_id_store_key("p2p:0:2", 0), unique_id_store_key("p2p:0:1", 0));
  EXPECT_TRUE(check_unique_id_bytes("k", 128, 128).ok());
  absl::Status bad = check_unique_id_bytes("nccl/x/0/unique_id", 5, 128);
  EXPECT_TRUE(absl::IsDataLoss(bad));
  EXPECT_TRUE(mentions(bad, "nccl/x/0/unique_id holds 5 bytes")) << bad;
}

TEST(AlltoallPlans, EqualAndUnevenSplits) {
  Tensor in = Tensor::zeros({6, 2}, DType::kFloat32);
  Tensor out = Tensor::zeros({4, 2}, DType::kFloat32);
  absl::StatusOr<AlltoallPlan> equal = alltoall_plan(in, in, {}, {}, 3);
  ASSERT_TRUE(equal.ok()) << equal.status();
  EXPECT_EQ(equal->send[2].offset, 8);
  EXPECT_EQ(equal->send[2].count, 4);
  absl::StatusOr<AlltoallPlan> uneven = alltoall_plan(out, in, {1, 0, 3}, {3, 2, 1}, 3);
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  EXPECT_EQ(uneven->send[1].offset, 6);
  EXPECT_EQ(uneven->send[1].count, 4);
  EXPECT_EQ(uneven->recv[1].count, 0);
  EXPECT_EQ(uneven->recv[2].offset, 2);
  EXPECT_EQ(uneven->recv[2].count, 6);
}

TEST(AlltoallPlans, BadSplitsAreNamed) {
  Tensor in = Tensor::zeros({5, 2}, DType::kFloat32);
  EXPECT_TRUE(mentions(alltoall_plan(in, in, {}, {}, 2).status(), "not divisible into 2"));
  EXPECT_TRUE(mentions(alltoall_plan(in, in, {5}, {2, 3}, 2).status(), "one entry per rank"));
  EXPECT_TRUE(mentions(alltoall_plan(in, in, {2, 3}, {2, 2}, 2).status(), "add up to 4 rows"));
  EXPECT_TRUE(mentions(alltoall_plan(in, in, {2, 3}, {6, -1}, 2).status(), "negative"));
}

TEST(NcclOptionsTest, EnvironmentOverridesAndBadValues) {
  std::map<std::string, std::string> env = {{"DDPX_NCCL_BLOCKING_WAIT", "1"},
                                            {"DDPX_NCCL_WATCHDOG_POLL_MS", "25"}};
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<NcclOptions> o = options_from_env(NcclOptions{}, get);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->blocking_wait);
  EXPECT_FALSE(o->high_priority_stream);
  EXPECT_EQ(o->watchdog_poll, std::chrono::milliseconds(25));

  env["DDPX_NCCL_BLOCKING_WAIT"] = "yes";
  EXPECT_TRUE(mentions(options_from_env(NcclOptions{}, get).status(),
                       "DDPX_NCCL_BLOCKING_WAIT=yes is not a boolean"));
  env["DDPX_NCCL_BLOCKING_WAIT"] = "0";
  env["DDPX_NCCL_WATCHDOG_POLL_MS"] = "0";
  EXPECT_TRUE(mentions(options_from_env(NcclOptions{}, get).status(), "1..60000 ms, got 0"));
  env["DDPX_NCCL_WATCHDOG_POLL_MS"] = "soon";
  EXPECT_TRUE(mentions(options_from_env(NcclOptions{}, get).status(), "not a number"));
  NcclOptions zero;
  zero.timeout = std::chrono::milliseconds(0);
  EXPECT_TRUE(mentions(check_options(zero), "timeout must be positive"));
}

}  // namespace
}  // namespace nccl
}  // namespace ddpx
