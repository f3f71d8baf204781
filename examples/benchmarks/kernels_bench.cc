// kernels_bench: the hooks' kernels (fp16/bf16 casts, int8 quantize and
// dequantize, batched Gram-Schmidt, batched GEMM) on CUDA tensors, each
// against the CPU hook kernel doing the same work in the same run (the
// anchor). Prints one line per kernel and a last line
//   RESULT device=... <kernel>_gpu_gbps=... <kernel>_cpu_gbps=... ...
// Without a GPU it says so and prints `RESULT gpu=none`.
//
//   bazel run --config=cuda //examples/benchmarks:kernels_bench -- --elements=16777216
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "cuda/device_kernels.h"
#include "cuda/stream.h"
#include "examples/benchmarks/bench_support.h"
#include "hooks/kernels/cpu_kernels.h"
#include "hooks/powersgd_orthogonalize.h"

ABSL_FLAG(int64_t, elements, 16 << 20, "float32 elements per buffer");
ABSL_FLAG(int, reps, 10, "repetitions per measurement (the best is kept)");

namespace ddpx {
namespace {

double best_seconds(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  fn();  // warm up (and first-touch allocations)
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

int run() {
  if (report_no_gpu()) return 0;
  DeviceKernels* gpu = device_kernels(Device::Type::kCUDA);
  const int64_t n = absl::GetFlag(FLAGS_elements);
  const int reps = absl::GetFlag(FLAGS_reps);
  const Device dev = Device::cuda(0);
  Tensor host = Tensor::zeros({n}, DType::kFloat32);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (int64_t i = 0; i < n; ++i) host.data_as<float>()[i] = normal(rng);
  Tensor x = *Tensor::empty({n}, DType::kFloat32, dev);
  exit_on_error(x.copy_from(host), "upload");
  Tensor half = *Tensor::empty({n}, DType::kFloat16, dev);
  const int64_t chunk = 1 << 20;
  const int64_t qbytes = n + 8 * ((n + chunk - 1) / chunk);
  Tensor q = *Tensor::empty({qbytes}, DType::kUInt8, dev);
  std::vector<uint16_t> cpu_half(n);
  std::vector<uint8_t> cpu_q(qbytes);
  auto gpu_time = [&](const std::function<absl::Status()>& fn) {
    return best_seconds(reps, [&] {
      exit_on_error(fn(), "kernel");
      exit_on_error(gpu->synchronize(dev), "synchronize");
    });
  };
  const double in_gb = n * 4.0 / 1e9;
  std::string result = "RESULT device=cuda:0";
  auto report = [&](const char* name, double gpu_s, double cpu_s) {
    printf("%-12s gpu %8.1f GB/s   cpu %6.2f GB/s   speedup %.1fx\n", name, in_gb / gpu_s,
           in_gb / cpu_s, cpu_s / gpu_s);
    absl::StrAppend(&result, " ", name, "_gpu_gbps=", in_gb / gpu_s, " ", name,
                    "_cpu_gbps=", in_gb / cpu_s);
  };
  report("fp16_cast", gpu_time([&] { return gpu->cast(x, half); }),
         best_seconds(reps, [&] {
           kernels::float_to_half(host.data_as<float>(), cpu_half.data(), n);
         }));
  report("int8_quant", gpu_time([&] { return gpu->quantize_minmax(x, chunk, q); }),
         best_seconds(reps, [&] {
           for (int64_t c = 0; c * chunk < n; ++c) {
             kernels::quantize(host.data_as<float>() + c * chunk, std::min(chunk, n - c * chunk),
                               cpu_q.data() + c * (chunk + 8));
           }
         }));
  const int64_t rows = n / 4 / 16;  // 16 matrices of rank 4, like PowerSGD's P
  Tensor p = *Tensor::empty({16, rows, 4}, DType::kFloat32, dev);
  exit_on_error(p.copy_from(host.view(0, {16, rows, 4})), "upload P");
  Tensor cpu_p = host.view(0, {16 * rows * 4}).clone();
  report("orthogonal", gpu_time([&] { return gpu->orthogonalize(p, 1e-8f); }),
         best_seconds(reps, [&] {
           for (int b = 0; b < 16; ++b)
             orthogonalize_columns(cpu_p.data_as<float>() + b * rows * 4, rows, 4, 1e-8f);
         }));
  printf("%s\n", result.c_str());
  return 0;
}

}  // namespace
}  // namespace ddpx

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddpx::run();
}
