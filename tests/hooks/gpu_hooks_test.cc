// The hooks on CUDA buckets (real NCCL groups, the CUDA DeviceKernels)
// against the same hooks on CPU buckets (real Gloo groups). Without a GPU
// every case skips with "NO GPU: ...": nothing here has run on a GPU yet.
//
// One rank per GPU. With one rank the fp16/bf16 casts and the int8 records
// must match the CPU hook bit for bit (the kernels are bit-identical and
// averaging over one rank is exact). With two GPUs fp16, bf16, the
// fp16+allreduce wrapper and int8 must still match bit for bit: a device
// bucket takes the CPU's operations in the CPU's order (divide, then
// allreduce SUM; the same records, summed in rank order and quantized as
// their average), and a sum of two values does not depend on the order.
// The division kernels themselves are checked against the host's bytes on
// one GPU by //tests/cuda:gpu_kernels_test. PowerSGD (both hooks, with and
// without error feedback/warm start, same-shape matrices batched, a float16
// bucket through fp16_compress_wrapper) is compared to 1e-4 (float16: 5e-3)
// of the largest value: on a CUDA bucket it runs on the device
// (hooks/powersgd_step.h through the CUDA kernels: cuBLAS products, the
// Gram-Schmidt kernel, element-wise kernels, memories on the device), which
// sums in other orders than the CPU loops, and NCCL may add the ranks' P
// and Q in another order than Gloo.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "hooks/default_hooks.h"
#include "hooks/int8_hook.h"
#include "hooks/powersgd_hook.h"
#include "process_group/nccl/nccl_backend.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "tests/cuda/gpu_skip.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using HookFactory = std::function<std::unique_ptr<CommHook>(std::shared_ptr<ProcessGroup>)>;

// Rank r's gradients: varied magnitudes and signs, reproducible.
std::vector<float> gradients(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) *
           (1.0f + static_cast<float>(i % 13));
  }
  return v;
}

// How the bucket is laid out and how many steps the hook runs on it (one
// hook, the bucket rewritten by each step: PowerSGD's error feedback and warm
// start carry over).
struct BucketLayout {
  std::vector<int64_t> offsets = {0};
  std::vector<Shape> shapes;  // empty: one flat gradient of the whole bucket
  int steps = 1;
};

std::vector<float> run_hook(const HookFactory& make, std::shared_ptr<ProcessGroup> pg,
                            Tensor buffer, const BucketLayout& layout = {}) {
  std::unique_ptr<CommHook> hook = make(pg);
  std::vector<Shape> shapes = layout.shapes;
  if (shapes.empty()) shapes = {{buffer.numel()}};
  GradBucket bucket(0, true, buffer, layout.offsets, shapes, {buffer});
  for (int step = 0; step < layout.steps; ++step) {
    std::shared_ptr<Future<Tensor>> f = hook->run(bucket);
    absl::Status s = f->wait(std::chrono::seconds(60));
    EXPECT_TRUE(s.ok()) << hook->name() << " step " << step << ": " << s;
    if (!s.ok()) return {};
    EXPECT_TRUE(f->value().shares_storage_with(buffer)) << "the result is the bucket itself";
  }
  Tensor host = Tensor::zeros(buffer.shape(), buffer.dtype());
  EXPECT_TRUE(host.copy_from(buffer).ok());
  return host.to_float_vector();
}

// Each rank's result with CPU buckets over Gloo.
std::vector<std::vector<float>> on_cpu(const HookFactory& make, int world, int64_t n,
                                       const BucketLayout& layout = {}) {
  std::vector<std::vector<float>> out(world);
  rank_threads::run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    out[pg->rank()] =
        run_hook(make, pg, Tensor::from_vector(gradients(pg->rank(), n)), layout);
  });
  return out;
}

// Each rank's result with buckets on cuda:rank over NCCL.
std::vector<std::vector<float>> on_gpu(const HookFactory& make, int world, int64_t n,
                                       const BucketLayout& layout = {}) {
  std::vector<std::vector<float>> out(world);
  auto store = std::make_shared<HashStore>(rank_threads::kTimeout);
  rank_threads::on_every_rank(world, [&](int r) {
    nccl::NcclOptions options;
    options.timeout = std::chrono::milliseconds(60000);
    options.watchdog_poll = std::chrono::milliseconds(5);
    auto backend = nccl::NcclBackend::create(store, r, world, options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto pg = std::make_shared<ProcessGroup>(*backend, store, options.timeout);
    Tensor host = Tensor::from_vector(gradients(r, n));
    absl::StatusOr<Tensor> dev = Tensor::empty({n}, DType::kFloat32, Device::cuda(r));
    ASSERT_TRUE(dev.ok()) << dev.status();
    ASSERT_TRUE(dev->copy_from(host).ok());
    out[r] = run_hook(make, pg, *dev, layout);
  });
  return out;
}

void expect_gpu_equals_cpu(const HookFactory& make, int world, int64_t n) {
  std::vector<std::vector<float>> cpu = on_cpu(make, world, n);
  std::vector<std::vector<float>> gpu = on_gpu(make, world, n);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(gpu[r].size(), static_cast<size_t>(n)) << "rank " << r;
    ASSERT_EQ(cpu[r].size(), static_cast<size_t>(n)) << "rank " << r;
    EXPECT_EQ(0, memcmp(gpu[r].data(), cpu[r].data(), n * sizeof(float)))
        << "rank " << r << ": the CUDA bucket's result differs from the CPU bucket's";
  }
}

// PowerSGD on a device bucket: to 1e-4 of the CPU bucket's result (relative
// to the value's magnitude, at least 1), since NCCL and Gloo may add the
// ranks' P and Q in different orders.
void expect_gpu_near_cpu(const HookFactory& make, int world, int64_t n,
                         const BucketLayout& layout, float relative = 1e-4f) {
  std::vector<std::vector<float>> cpu = on_cpu(make, world, n, layout);
  std::vector<std::vector<float>> gpu = on_gpu(make, world, n, layout);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(gpu[r].size(), static_cast<size_t>(n)) << "rank " << r;
    ASSERT_EQ(cpu[r].size(), static_cast<size_t>(n)) << "rank " << r;
    float scale = 1.0f;
    for (float v : cpu[r]) scale = std::max(scale, std::fabs(v));
    for (int64_t i = 0; i < n; ++i) {
      const float tolerance = relative * scale;
      ASSERT_NEAR(gpu[r][i], cpu[r][i], tolerance) << "rank " << r << " element " << i;
    }
  }
}

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

const HookFactory kFp16 = [](std::shared_ptr<ProcessGroup> pg) -> std::unique_ptr<CommHook> {
  return make_fp16_compress_hook(pg);
};
const HookFactory kBf16 = [](std::shared_ptr<ProcessGroup> pg) -> std::unique_ptr<CommHook> {
  return make_bf16_compress_hook(pg);
};
const HookFactory kFp16Allreduce =
    [](std::shared_ptr<ProcessGroup> pg) -> std::unique_ptr<CommHook> {
  return fp16_compress_wrapper(make_allreduce_hook(pg));
};
const HookFactory kInt8 = [](std::shared_ptr<ProcessGroup> pg) -> std::unique_ptr<CommHook> {
  auto hook = make_int8_hook(pg, {});
  EXPECT_TRUE(hook.ok()) << hook.status();
  return hook.ok() ? std::move(*hook) : nullptr;
};

HookFactory powersgd(std::map<std::string, std::string> options, bool batched) {
  return [options, batched](std::shared_ptr<ProcessGroup> pg) -> std::unique_ptr<CommHook> {
    auto hook = make_powersgd_hook(pg, options, batched);
    EXPECT_TRUE(hook.ok()) << hook.status();
    return hook.ok() ? std::move(*hook) : nullptr;
  };
}

// A 64x48 matrix (compressed at rank 2), a flat 37-element bias (sent
// uncompressed) and a 20x30 matrix: 3709 elements.
BucketLayout powersgd_layout(int steps) {
  BucketLayout layout;
  layout.offsets = {0, 64 * 48, 64 * 48 + 37};
  layout.shapes = {{64, 48}, {37}, {20, 30}};
  layout.steps = steps;
  return layout;
}
constexpr int64_t kPowerSGDNumel = 64 * 48 + 37 + 20 * 30;

// Compressing from the first step, and with error feedback and warm start
// (two allreduce steps, then three compressed ones).
const std::map<std::string, std::string> kPlainPowerSGD = {
    {"rank", "2"}, {"start_iter", "0"}, {"use_error_feedback", "0"}, {"warm_start", "0"}};
const std::map<std::string, std::string> kFeedbackPowerSGD = {{"rank", "2"},
                                                              {"start_iter", "2"}};

void expect_powersgd_gpu_near_cpu(int world) {
  for (bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "batched_powersgd" : "powersgd");
    expect_gpu_near_cpu(powersgd(kPlainPowerSGD, batched), world, kPowerSGDNumel,
                        powersgd_layout(1));
    expect_gpu_near_cpu(powersgd(kFeedbackPowerSGD, batched), world, kPowerSGDNumel,
                        powersgd_layout(5));
  }
}

TEST(HooksOnOneGpu, PowerSGDMatchesTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  expect_powersgd_gpu_near_cpu(1);
}

// Three 32x24 matrices back to back: one strided-batched cuBLAS call per
// product and one Gram-Schmidt launch per factor on the device.
TEST(HooksOnOneGpu, PowerSGDBatchesSameShapeMatricesAndMatchesTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  BucketLayout layout;
  layout.offsets = {0, 768, 1536, 2304};
  layout.shapes = {{32, 24}, {32, 24}, {32, 24}, {11}};
  layout.steps = 5;
  expect_gpu_near_cpu(powersgd(kFeedbackPowerSGD, false), 1, 2315, layout);
}

// fp16_compress_wrapper(powerSGD_hook): a float16 bucket widened on the
// device, P and Q on a float16 wire, the result narrowed back.
TEST(HooksOnOneGpu, Fp16WrappedPowerSGDMatchesTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  const HookFactory wrapped = [](std::shared_ptr<ProcessGroup> pg) {
    return fp16_compress_wrapper(powersgd(kFeedbackPowerSGD, false)(pg));
  };
  expect_gpu_near_cpu(wrapped, 1, kPowerSGDNumel, powersgd_layout(5), 5e-3f);
}

TEST(HooksOnTwoGpus, PowerSGDMatchesTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "NO GPU: needs 2 CUDA devices, found " << gpu_count();
  expect_powersgd_gpu_near_cpu(2);
}

TEST(HooksOnOneGpu, Fp16Bf16AndWrapperMatchTheCpuBitForBit) {
  DDPX_SKIP_WITHOUT_GPU();
  expect_gpu_equals_cpu(kFp16, 1, 10007);
  expect_gpu_equals_cpu(kBf16, 1, 10007);
  expect_gpu_equals_cpu(kFp16Allreduce, 1, 10007);
}

TEST(HooksOnOneGpu, Int8MatchesTheCpuBitForBit) {
  DDPX_SKIP_WITHOUT_GPU();
  expect_gpu_equals_cpu(kInt8, 1, 10007);
  expect_gpu_equals_cpu(kInt8, 1, 3);
}

TEST(HooksOnTwoGpus, Int8MatchesTheCpuBitForBit) {
  DDPX_SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "NO GPU: needs 2 CUDA devices, found " << gpu_count();
  expect_gpu_equals_cpu(kInt8, 2, 10007);
  expect_gpu_equals_cpu(kInt8, 2, 1);  // rank 1's chunk is empty
}

TEST(HooksOnTwoGpus, Fp16Bf16AndWrapperMatchTheCpuBitForBit) {
  DDPX_SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "NO GPU: needs 2 CUDA devices, found " << gpu_count();
  expect_gpu_equals_cpu(kFp16, 2, 10007);
  expect_gpu_equals_cpu(kBf16, 2, 10007);
  expect_gpu_equals_cpu(kFp16Allreduce, 2, 10007);
}

}  // namespace
}  // namespace ddpx
