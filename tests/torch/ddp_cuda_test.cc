// ddpx::torch::DistributedDataParallel over CUDA modules with ddpx's NCCL
// backend (--config=cuda): ranks as threads, one GPU each (up to 2). Without
// a GPU every test skips and says it did not run.
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "examples/torch/cnn.h"
#include "gtest/gtest.h"
#include "reducer/torch/distributed_data_parallel.h"
#include "tests/cuda/gpu_skip.h"
#include "tests/rank_threads.h"
#include "tests/torch/torch_test_util.h"

namespace ddpx {
namespace {

namespace F = ::torch::nn::functional;
using torch::DDPOptions;
using torch::DistributedDataParallel;
using torch_testing::golden_batch;
using torch_testing::init_parameters;

std::vector<float> flat_grads_on_host(::torch::nn::Module& module) {
  std::vector<float> out;
  for (const at::Tensor& p : module.parameters()) {
    at::Tensor g = p.grad().to(at::kCPU).contiguous();
    out.insert(out.end(), g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
  }
  return out;
}

void copy_parameters(::torch::nn::Module& to, ::torch::nn::Module& from) {
  ::torch::NoGradGuard no_grad;
  std::vector<at::Tensor> t = to.parameters(), f = from.parameters();
  for (size_t i = 0; i < t.size(); ++i) t[i].copy_(f[i]);
}

// The residual CNN on cuda:rank, 3 steps: DDP's gradients are the average of
// what each rank's twin (same parameters, no DDP) computes, with copies and
// with bucket views, before and after the buckets are rebuilt.
TEST(TorchDdpCuda, GradientsAreTheAverageOfEachRanksOwnOverNccl) {
  DDPX_SKIP_WITHOUT_GPU();
  const int world = std::min(cuda_device_count(), 2);
  constexpr int kSteps = 3;
  for (bool view : {false, true}) {
    std::vector<std::vector<std::vector<float>>> ddp_grads(world), local_grads(world);
    rank_threads::GroupOptions groups;
    groups.backend = "nccl";
    rank_threads::run_groups(
        world,
        [&](int rank, std::shared_ptr<ProcessGroup> pg) {
          const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(rank));
          examples::ResidualCnn model(4, 8), twin(4, 8);
          init_parameters(*model);
          model->to(device);
          twin->to(device);
          DDPOptions o;
          o.gradient_as_bucket_view = view;
          o.first_bucket_cap_mb = 1e-3;  // several buckets
          auto ddp = DistributedDataParallel::create(model, pg, o);
          ASSERT_TRUE(ddp.ok()) << ddp.status();
          ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.05));
          for (int step = 0; step < kSteps; ++step) {
            auto [x, y] = golden_batch(8, 8, step, rank);
            x = x.to(device);
            y = y.to(device);
            copy_parameters(*twin, *model);
            twin->zero_grad();
            F::cross_entropy(twin(x), y).backward();
            local_grads[rank].push_back(flat_grads_on_host(*twin));
            opt.zero_grad(/*set_to_none=*/false);
            F::cross_entropy(model(x), y).backward();
            ddp_grads[rank].push_back(flat_grads_on_host(*model));
            opt.step();
          }
          EXPECT_EQ((*ddp)->stats().step, static_cast<uint64_t>(kSteps));
        },
        groups);
    for (int step = 0; step < kSteps; ++step) {
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(ddp_grads[r].size(), static_cast<size_t>(kSteps));
        const std::vector<float>& got = ddp_grads[r][step];
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          float want = 0;
          for (int q = 0; q < world; ++q) want += local_grads[q][step][i] / world;
          if (std::fabs(got[i] - want) > 1e-5f * (1 + std::fabs(want)) && ++bad <= 5) {
            ADD_FAILURE() << "view " << view << " rank " << r << " step " << step
                          << " element " << i << ": " << got[i] << " vs " << want;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ddpx
