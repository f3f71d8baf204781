// ddpx::torch::DistributedDataParallel over CUDA modules with ddpx's NCCL
// backend (--config=cuda): ranks as threads, one GPU each (up to 2). Without
// a GPU every test skips and says it did not run.
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <functional>
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
using torch_testing::flat_grads;
using torch_testing::golden_batch;
using torch_testing::init_parameters;

std::vector<float> flat_host_values(const std::vector<at::Tensor>& tensors) {
  std::vector<float> out;
  for (const at::Tensor& t : tensors) {
    at::Tensor h = t.to(at::kCPU).contiguous();
    out.insert(out.end(), h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
  }
  return out;
}

void copy_parameters(::torch::nn::Module& to, ::torch::nn::Module& from) {
  ::torch::NoGradGuard no_grad;
  std::vector<at::Tensor> t = to.parameters(), f = from.parameters();
  for (size_t i = 0; i < t.size(); ++i) t[i].copy_(f[i]);
}

// body(rank, group, device) on `world` rank threads over `backend`, each
// with one torch thread; the device is cuda:rank, or the CPU.
void run_on_devices(
    int world, const std::string& backend, c10::DeviceType type,
    const std::function<void(int, std::shared_ptr<ProcessGroup>, const c10::Device&)>& body) {
  rank_threads::GroupOptions groups;
  groups.backend = backend;
  rank_threads::run_groups(
      world,
      [&](int rank, std::shared_ptr<ProcessGroup> pg) {
        at::set_num_threads(1);
        const c10::Device device =
            type == c10::DeviceType::CUDA
                ? c10::Device(type, static_cast<c10::DeviceIndex>(rank))
                : c10::Device(type);
        body(rank, std::move(pg), device);
      },
      groups);
}

// The residual CNN with the golden weights, on `device`.
examples::ResidualCnn golden_cnn(const c10::Device& device) {
  examples::ResidualCnn model(4, 8);
  init_parameters(*model);
  model->to(device);
  return model;
}

// DDP options with several buckets (a first bucket of 1 KB).
DDPOptions several_buckets() {
  DDPOptions o;
  o.first_bucket_cap_mb = 1e-3;
  return o;
}

// Forward and backward of golden batch (step, rank) on `device`.
void backward_on(examples::ResidualCnn& cnn, int step, int rank, const c10::Device& device) {
  auto [x, y] = golden_batch(8, 8, step, rank);
  F::cross_entropy(cnn(x.to(device)), y.to(device)).backward();
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
    run_on_devices(world, "nccl", c10::DeviceType::CUDA,
                   [&](int rank, std::shared_ptr<ProcessGroup> pg, const c10::Device& device) {
                     examples::ResidualCnn model = golden_cnn(device), twin = golden_cnn(device);
                     DDPOptions o = several_buckets();
                     o.gradient_as_bucket_view = view;
                     auto ddp = DistributedDataParallel::create(model, pg, o);
                     ASSERT_TRUE(ddp.ok()) << ddp.status();
                     ::torch::optim::SGD opt(model->parameters(),
                                             ::torch::optim::SGDOptions(0.05));
                     for (int step = 0; step < kSteps; ++step) {
                       copy_parameters(*twin, *model);
                       twin->zero_grad();
                       backward_on(twin, step, rank, device);
                       local_grads[rank].push_back(flat_grads(*twin));
                       opt.zero_grad(/*set_to_none=*/false);
                       backward_on(model, step, rank, device);
                       ddp_grads[rank].push_back(flat_grads(*model));
                       opt.step();
                     }
                     EXPECT_EQ((*ddp)->stats().step, static_cast<uint64_t>(kSteps));
                   });
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

// The CNN trained `steps` steps through DDP with `hook` over `backend` on
// each rank's device: each rank's flat gradients after every step.
std::vector<std::vector<std::vector<float>>> hooked_grads(int world, const std::string& backend,
                                                          c10::DeviceType type,
                                                          const std::string& hook, int steps) {
  std::vector<std::vector<std::vector<float>>> grads(world);
  run_on_devices(world, backend, type,
                 [&](int rank, std::shared_ptr<ProcessGroup> pg, const c10::Device& device) {
                   examples::ResidualCnn model = golden_cnn(device);
                   DDPOptions o = several_buckets();
                   o.hook = hook;
                   auto ddp = DistributedDataParallel::create(model, pg, o);
                   ASSERT_TRUE(ddp.ok()) << ddp.status();
                   ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.05));
                   for (int step = 0; step < steps; ++step) {
                     opt.zero_grad(/*set_to_none=*/false);
                     backward_on(model, step, rank, device);
                     grads[rank].push_back(flat_grads(*model));
                     opt.step();
                   }
                 });
  return grads;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Every hook on CUDA buckets (NCCL, the device kernels) gives the gradients
// the same hook gives on CPU buckets (Gloo, the CPU kernels), step by step:
// the CUDA model's own gradients differ from the CPU's by float rounding
// only, so the hooks' results may differ by that and by what a 16-bit or
// 8-bit wire rounds it to. A wrong cast, scale or factor is off by far more.
TEST(TorchDdpCuda, HooksOnCudaModulesMatchTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  const int world = std::min(cuda_device_count(), 2);
  constexpr int kSteps = 4;
  const std::vector<std::pair<std::string, double>> hooks = {
      {"allreduce", 1e-5},
      {"fp16", 2e-3},
      {"bf16", 1e-2},
      {"fp16+allreduce", 2e-3},
      {"powersgd:rank=2,start_iter=2", 1e-3},
      {"batched_powersgd:rank=2,start_iter=2", 1e-3},
      {"int8", 2e-2},
  };
  for (const auto& [hook, tolerance] : hooks) {
    SCOPED_TRACE(hook);
    auto cpu = hooked_grads(world, "gloo", c10::DeviceType::CPU, hook, kSteps);
    auto gpu = hooked_grads(world, "nccl", c10::DeviceType::CUDA, hook, kSteps);
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(gpu[r].size(), static_cast<size_t>(kSteps));
      ASSERT_EQ(cpu[r].size(), static_cast<size_t>(kSteps));
      for (int step = 0; step < kSteps; ++step) {
        ASSERT_EQ(gpu[r][step].size(), cpu[r][step].size());
        EXPECT_LT(relative_l2(gpu[r][step], cpu[r][step]), tolerance)
            << "rank " << r << " step " << step;
      }
    }
  }
}

// The reducer's control messages (the parameter check, rank 0's bucket
// order, join's flags and election) travel on the model's device, so join
// with uneven inputs and find_unused_parameters work over NCCL too: rank r
// has 3 + r batches; afterwards every rank holds the same parameters.
TEST(TorchDdpCuda, JoinWithUnevenInputsOverNccl) {
  DDPX_SKIP_WITHOUT_GPU();
  const int world = std::min(cuda_device_count(), 2);
  std::vector<std::vector<float>> params(world);
  run_on_devices(world, "nccl", c10::DeviceType::CUDA,
                 [&](int rank, std::shared_ptr<ProcessGroup> pg, const c10::Device& device) {
                   examples::ResidualCnn model = golden_cnn(device);
                   DDPOptions o = several_buckets();
                   o.find_unused_parameters = true;
                   auto ddp = DistributedDataParallel::create(model, pg, o);
                   ASSERT_TRUE(ddp.ok()) << ddp.status();
                   ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.05));
                   {
                     torch::Join join(**ddp);
                     for (int step = 0; step < 3 + rank; ++step) {
                       opt.zero_grad(/*set_to_none=*/false);
                       backward_on(model, step, rank, device);
                       opt.step();
                     }
                     absl::Status s = join.join();
                     ASSERT_TRUE(s.ok()) << s;
                   }
                   params[rank] = flat_host_values(model->parameters());
                 });
  for (int r = 1; r < world; ++r) EXPECT_EQ(params[r], params[0]) << "rank " << r;
  ASSERT_FALSE(params[0].empty());
  for (float v : params[0]) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace ddpx
