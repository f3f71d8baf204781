// The nccl backend on real GPUs: every collective with one rank on one GPU
// (world size 1: NCCL runs its kernels, results are checkable by hand), and
// with two GPUs two ranks as threads, including send/recv. Without a device
// the GPU tests skip loudly; backend creation must then fail with the reason.
#include <thread>
#include <vector>

#include "process_group/nccl/nccl_backend.h"
#include "store/hash_store.h"
#include "tests/cuda/gpu_skip.h"

namespace ddpx {
namespace nccl {
namespace {

using std::chrono::milliseconds;

Tensor gpu_tensor(const std::vector<float>& values, int device = 0) {
  Tensor host = Tensor::from_vector(values);
  absl::StatusOr<Tensor> t = Tensor::empty(host.shape(), DType::kFloat32, Device::cuda(device));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->copy_from(host).ok());
  return *t;
}

std::vector<float> host_values(const Tensor& dev) {
  Tensor host = Tensor::zeros(dev.shape(), dev.dtype());
  EXPECT_TRUE(host.copy_from(dev).ok());
  return host.to_float_vector();
}

std::shared_ptr<NcclBackend> make_backend(std::shared_ptr<Store> store, int rank, int size) {
  NcclOptions options;
  options.timeout = milliseconds(60000);
  options.watchdog_poll = milliseconds(5);
  absl::StatusOr<std::shared_ptr<NcclBackend>> b = NcclBackend::create(store, rank, size, options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : nullptr;
}

void finish(const std::shared_ptr<Work>& work) {
  absl::Status s = work->get_future()->wait(milliseconds(60000));
  ASSERT_TRUE(s.ok()) << op_type_name(work->op()) << ": " << s;
}

TEST(NcclBackendNoGpu, CreationSaysWhyItCannotRun) {
  if (cuda_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present";
  absl::StatusOr<std::shared_ptr<NcclBackend>> b =
      NcclBackend::create(std::make_shared<HashStore>(), 0, 1, NcclOptions{});
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(b.status()));
  EXPECT_NE(b.status().message().find("nccl backend needs a CUDA device: cudaGetDeviceCount"),
            std::string::npos)
      << b.status();
}

TEST(NcclBackendOneGpu, CollectivesOfOneRank) {
  DDPX_SKIP_WITHOUT_GPU();
  auto backend = make_backend(std::make_shared<HashStore>(), 0, 1);
  ASSERT_NE(backend, nullptr);

  Tensor t = gpu_tensor({1, 2, 3, 4});
  finish(backend->allreduce({t}, AllreduceOptions{ReduceOp::SUM, milliseconds(60000)}));
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 2, 3, 4}));
  finish(backend->allreduce({t}, AllreduceOptions{ReduceOp::AVG, milliseconds(60000)}));
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(backend->communicator_count(), 1u) << "the communicator is cached";

  Tensor u = gpu_tensor({5, 6});
  finish(backend->allreduce_coalesced({t, u}, AllreduceOptions{}));
  finish(backend->broadcast({u}, BroadcastOptions{}));
  finish(backend->reduce({u}, ReduceOptions{}));
  EXPECT_EQ(host_values(u), (std::vector<float>{5, 6}));

  Tensor gathered = gpu_tensor({0, 0, 0, 0});
  finish(backend->allgather_into_tensor(gathered, t, AllgatherOptions{}));
  EXPECT_EQ(host_values(gathered), (std::vector<float>{1, 2, 3, 4}));
  Tensor out = gpu_tensor({0, 0, 0, 0});
  finish(backend->allgather({{out}}, {t}, AllgatherOptions{}));
  EXPECT_EQ(host_values(out), (std::vector<float>{1, 2, 3, 4}));
  Tensor rs = gpu_tensor({0, 0, 0, 0});
  finish(backend->reduce_scatter({rs}, {{t}}, ReduceScatterOptions{}));
  EXPECT_EQ(host_values(rs), (std::vector<float>{1, 2, 3, 4}));
  finish(backend->reduce_scatter_tensor(rs, t, ReduceScatterOptions{}));
  Tensor a2a = gpu_tensor({0, 0, 0, 0});
  finish(backend->alltoall({a2a}, {t}, AllToAllOptions{}));
  EXPECT_EQ(host_values(a2a), (std::vector<float>{1, 2, 3, 4}));
  Tensor a2ab = gpu_tensor({0, 0, 0, 0});
  finish(backend->alltoall_base(a2ab, t, {}, {}, AllToAllOptions{}));
  EXPECT_EQ(host_values(a2ab), (std::vector<float>{1, 2, 3, 4}));
  Tensor g = gpu_tensor({0, 0, 0, 0});
  finish(backend->gather({{g}}, {t}, GatherOptions{}));
  EXPECT_EQ(host_values(g), (std::vector<float>{1, 2, 3, 4}));
  Tensor s = gpu_tensor({0, 0, 0, 0});
  finish(backend->scatter({s}, {{t}}, ScatterOptions{}));
  EXPECT_EQ(host_values(s), (std::vector<float>{1, 2, 3, 4}));
  auto barrier = backend->barrier(BarrierOptions{milliseconds(60000)});
  EXPECT_TRUE(barrier->wait(milliseconds(60000)).ok());
}

TEST(NcclBackendOneGpu, UnsupportedOpsFailClearly) {
  DDPX_SKIP_WITHOUT_GPU();
  auto backend = make_backend(std::make_shared<HashStore>(), 0, 1);
  ASSERT_NE(backend, nullptr);
  Tensor t = Tensor::empty({4}, DType::kInt32, Device::cuda(0)).value();
  absl::Status band =
      backend->allreduce({t}, AllreduceOptions{ReduceOp::BAND, milliseconds(1000)})->wait();
  EXPECT_NE(band.message().find("no bitwise reductions"), std::string::npos) << band;
  absl::Status cpu =
      backend->allreduce({Tensor::zeros({4}, DType::kFloat32)}, AllreduceOptions{})->wait();
  EXPECT_NE(cpu.message().find("needs CUDA tensors"), std::string::npos) << cpu;
  EXPECT_TRUE(absl::IsUnimplemented(backend->recv_anysource({t}, SendRecvOptions{})->wait()));
}

TEST(NcclBackendTwoGpus, TwoRanksAllreduceAndSendRecv) {
  DDPX_SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs; did NOT run";
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([store, rank] {
      auto backend = make_backend(store, rank, 2);
      ASSERT_NE(backend, nullptr);
      Tensor t = gpu_tensor({float(rank + 1), 10.0f * (rank + 1)}, rank);
      finish(backend->allreduce({t}, AllreduceOptions{ReduceOp::SUM, milliseconds(60000)}));
      EXPECT_EQ(host_values(t), (std::vector<float>{3, 30}));
      Tensor msg = gpu_tensor({rank == 0 ? 42.0f : 0.0f}, rank);
      if (rank == 0) {
        finish(backend->send({msg}, 1, SendRecvOptions{}));
      } else {
        finish(backend->recv({msg}, 0, SendRecvOptions{}));
        EXPECT_EQ(host_values(msg), (std::vector<float>{42}));
      }
    });
  }
  for (auto& r : ranks) r.join();
}

}  // namespace
}  // namespace nccl
}  // namespace ddpx
