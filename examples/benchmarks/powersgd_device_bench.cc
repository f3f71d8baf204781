// powersgd_device_bench: PowerSGD's own work on CUDA buckets (the hook with
// no process group, so its device work alone) on ResNet-50's
// gradients in DDP's buckets, against two anchors measured in the same run
// on the same device:
//   - its two products alone: P = M Q and Q = M^T P for every compressed
//     matrix through the same DeviceKernels::matmul (cuBLAS);
//   - the memory-traffic floor: a device-to-device copy of every bucket
//     (2 |M| of traffic) scaled to the 7 |M| a step with error feedback must
//     move (docs/powersgd.md, "Benchmark").
// Prints RESULT gpu_powersgd_vs_gemm=... gpu_powersgd_traffic_floor_vs_gemm=...
// Without a GPU it says so and prints `RESULT gpu=none`.
//
//   bazel run --config=cuda //examples/benchmarks:powersgd_device_bench -- --rank=1 --reps=10
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "cuda/device_kernels.h"
#include "cuda/stream.h"
#include "examples/benchmarks/bench_support.h"
#include "examples/benchmarks/powersgd_bench_part.h"
#include "hooks/grad_bucket.h"
#include "hooks/powersgd_hook.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_random.h"

ABSL_FLAG(int64_t, rank, 1, "matrix_approximation_rank");
ABSL_FLAG(int, reps, 10, "timed iterations (the median is kept)");

namespace ddpx {
namespace {

struct DeviceBucket {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;
  Tensor gradient;  // on the device: what backward produced
  Tensor buffer;    // on the device: what the hook rewrites
};

double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int run() {
  if (report_no_gpu()) return 0;
  DeviceKernels* k = device_kernels(Device::Type::kCUDA);
  const Device dev = Device::cuda(0);
  const int64_t rank = absl::GetFlag(FLAGS_rank);
  const int reps = absl::GetFlag(FLAGS_reps);
  const std::vector<Shape> shapes = resnet50_gradient_shapes();
  std::vector<DeviceBucket> buckets;
  uint64_t seed = 1;
  int64_t numel = 0;
  for (BucketLayout& layout : ddp_float32_buckets(shapes)) {
    DeviceBucket b;
    const int64_t at = layout.numel;
    b.shapes = std::move(layout.shapes);
    b.offsets = std::move(layout.offsets);
    Tensor host = Tensor::zeros({at}, DType::kFloat32);
    fill_standard_normal(host.data_as<float>(), at, seed++);
    b.gradient = *Tensor::empty({at}, DType::kFloat32, dev);
    b.buffer = *Tensor::empty({at}, DType::kFloat32, dev);
    exit_on_error(b.gradient.copy_from(host), "upload");
    numel += at;
    buckets.push_back(std::move(b));
  }

  PowerSGDOptions o;
  o.matrix_approximation_rank = rank;
  o.start_powerSGD_iter = 2;
  auto state = PowerSGDState::create(o);
  exit_on_error(state.status(), "state");
  (*state)->set_log_sink([](const std::string&) {});
  PowerSGDHook hook(nullptr, *state);
  auto iteration = [&](bool timed_part_only, double* hook_ms) {
    for (size_t i = 0; i < buckets.size(); ++i) {
      DeviceBucket& b = buckets[i];
      exit_on_error(k->copy(b.gradient, b.buffer), "refill");
      exit_on_error(k->synchronize(dev), "synchronize");
      GradBucket bucket(i, i + 1 == buckets.size(), b.buffer, b.offsets, b.shapes, {});
      auto t0 = std::chrono::steady_clock::now();
      exit_on_error(hook.run(bucket)->wait(), "hook");
      if (timed_part_only) {
        *hook_ms += std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0).count();
      }
    }
  };
  double unused = 0;
  for (int it = 0; it < 3; ++it) iteration(false, &unused);  // 2 plain + 1 warm-up
  std::vector<double> own;
  for (int it = 0; it < reps; ++it) {
    double ms = 0;
    iteration(true, &ms);
    own.push_back(ms);
  }
  std::sort(own.begin(), own.end());
  const double own_ms = own[own.size() / 2];

  std::vector<CompressionPlan> plans;
  std::vector<Tensor> ps, qs;
  int matrices = 0;
  for (DeviceBucket& b : buckets) {
    plans.push_back(*plan_layerwise(b.offsets, b.shapes, b.buffer.numel(), o));
    ps.push_back(*Tensor::empty({std::max<int64_t>(1, plans.back().p_numel)}, DType::kFloat32, dev));
    qs.push_back(*Tensor::empty({std::max<int64_t>(1, plans.back().q_numel)}, DType::kFloat32, dev));
    exit_on_error(k->fill(qs.back(), 0.5f), "fill");
    matrices += static_cast<int>(plans.back().matrices.size());
  }
  const double gemm_ms = median_ms(reps, [&] {
    for (size_t i = 0; i < buckets.size(); ++i) {
      for (const CompressedMatrix& m : plans[i].matrices) {
        Tensor mat = buckets[i].gradient.view(m.offset, {m.rows, m.cols});
        Tensor p = ps[i].view(m.p_offset, {m.rows, m.rank});
        Tensor q = qs[i].view(m.q_offset, {m.cols, m.rank});
        exit_on_error(k->matmul(mat, false, q, false, p), "P = M Q");
        exit_on_error(k->matmul(mat, true, p, false, q), "Q = M^T P");
      }
    }
    exit_on_error(k->synchronize(dev), "synchronize");
  });
  const double copy_ms = median_ms(reps, [&] {
    for (DeviceBucket& b : buckets) exit_on_error(k->copy(b.gradient, b.buffer), "copy");
    exit_on_error(k->synchronize(dev), "synchronize");
  });
  const double floor_ms = copy_ms * 7.0 / 2.0;
  printf("PowerSGD on cuda:0, rank %lld, %lld float32 values in %zu buckets (%d matrices)\n",
         static_cast<long long>(rank), static_cast<long long>(numel), buckets.size(), matrices);
  printf("  own work (hook, no communication): %.3f ms\n", own_ms);
  printf("  its two products alone (cuBLAS): %.3f ms -> ratio %.3f (target <= 1.3)\n", gemm_ms,
         own_ms / gemm_ms);
  printf("  device copy of the buckets: %.3f ms (%.1f GB/s); 7 |M| traffic floor %.3f ms "
         "-> floor vs products %.3f\n",
         copy_ms, 2.0 * numel * 4 / (copy_ms * 1e6), floor_ms, floor_ms / gemm_ms);
  printf("RESULT device=cuda:0 gpu_powersgd_ms=%.3f gpu_powersgd_vs_gemm=%.3f "
         "gpu_powersgd_traffic_floor_vs_gemm=%.3f gpu_powersgd_vs_traffic_floor=%.3f\n",
         own_ms, own_ms / gemm_ms, floor_ms / gemm_ms, own_ms / floor_ms);
  return 0;
}

}  // namespace
}  // namespace ddpx

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddpx::run();
}
