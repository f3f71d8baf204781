// Gradient bytes per second through each hook's local compression work on
// ResNet-50's gradients (25.6M float32 values in DDP's buckets), against
// memcpy of the same bytes in the same run, and against PyTorch doing the
// same work when torch is importable.
//
//   bazel run -c opt //examples/benchmarks:hook_bench [-- --reps=7 --torch_threads=1]
//
// "Work" is what a hook does on the CPU besides communicating:
//   allreduce  divide by the world size (2)
//   fp16/bf16  divide+cast to 16 bits, then widen back into float32
//   int8       per chunk (2 per bucket): min/max, 8-bit codes, then decode
// Rates count the float32 gradient bytes (4 per value) per second, best of
// --reps (measured round-robin). The last line is `RESULT key=value ...`.
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "examples/benchmarks/hook_bench_shapes.h"
#include "examples/benchmarks/powersgd_bench_part.h"
#include "hooks/bytegrad.h"
#include "hooks/kernels/cpu_kernels.h"

ABSL_FLAG(int, reps, 7, "repetitions per measurement (the best is kept)");
ABSL_FLAG(int, torch_threads, 1,
          "torch.set_num_threads for the PyTorch comparison (ours is one thread)");
ABSL_FLAG(bool, torch, true, "also measure PyTorch (skipped if it cannot be imported)");

namespace ddpx {
namespace bench {
namespace {

namespace k = kernels;
constexpr int kWorld = 2;

struct Buffers {
  std::vector<std::vector<float>> src, dst;
  std::vector<std::vector<uint16_t>> narrow;
  std::vector<std::vector<uint8_t>> records;
  int64_t bytes = 0;
};

Buffers make_buffers(const std::vector<int64_t>& numels) {
  Buffers b;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  for (int64_t n : numels) {
    std::vector<float> s(n);
    for (auto& v : s) v = normal(rng);
    b.src.push_back(std::move(s));
    b.dst.emplace_back(n, 0.0f);
    b.narrow.emplace_back(n, 0);
    b.records.emplace_back(kWorld * ChunkLayout(n, kWorld).record_bytes, 0);
    b.bytes += n * 4;
  }
  return b;
}

// Best rate of each named work, measured round-robin (every round runs
// every work once), so memcpy and the hooks see the same machine load.
std::map<std::string, double> best_rates(
    const std::vector<std::pair<std::string, std::function<void()>>>& works,
    int64_t bytes, int reps) {
  std::map<std::string, double> best_seconds;
  for (const auto& [name, work] : works) {
    work();  // warm caches and page tables
    best_seconds[name] = 1e30;
  }
  for (int r = 0; r < reps; ++r) {
    for (const auto& [name, work] : works) {
      absl::Time t0 = absl::Now();
      work();
      best_seconds[name] =
          std::min(best_seconds[name], absl::ToDoubleSeconds(absl::Now() - t0));
    }
  }
  std::map<std::string, double> rates;
  for (const auto& [name, seconds] : best_seconds) rates[name] = bytes / seconds;
  return rates;
}

void cast_round_trip(Buffers& b, bool fp16, k::Isa isa) {
  for (size_t i = 0; i < b.src.size(); ++i) {
    const int64_t n = static_cast<int64_t>(b.src[i].size());
    if (fp16) {
      k::float_to_half(b.src[i].data(), b.narrow[i].data(), n, kWorld, isa);
      k::half_to_float(b.narrow[i].data(), b.dst[i].data(), n, isa);
    } else {
      k::float_to_bfloat16(b.src[i].data(), b.narrow[i].data(), n, kWorld, isa);
      k::bfloat16_to_float(b.narrow[i].data(), b.dst[i].data(), n, isa);
    }
  }
}

void quantize_round_trip(Buffers& b, k::Isa isa) {
  for (size_t i = 0; i < b.src.size(); ++i) {
    const ChunkLayout layout(static_cast<int64_t>(b.src[i].size()), kWorld);
    for (int c = 0; c < kWorld; ++c) {
      uint8_t* record = b.records[i].data() + c * layout.record_bytes;
      k::quantize(b.src[i].data() + layout.begin(c), layout.length(c), record, isa);
      k::dequantize(record, layout.length(c), b.dst[i].data() + layout.begin(c), isa);
    }
  }
}

// Runs hook_bench_torch.py; returns hook -> bytes/s (empty if unavailable).
std::map<std::string, double> torch_rates(const std::vector<int64_t>& numels, int reps) {
  std::map<std::string, double> rates;
  std::string cmd = absl::StrCat(
      "python3 examples/benchmarks/hook_bench_torch.py ", absl::GetFlag(FLAGS_torch_threads),
      " ", reps, " ", absl::StrJoin(numels, " "), " 2>/dev/null");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return rates;
  char name[64];
  double rate;
  while (fscanf(pipe, "%63s %lf", name, &rate) == 2) rates[name] = rate;
  pclose(pipe);
  return rates;
}

std::string gbs(double rate) { return absl::StrFormat("%.2f GB/s", rate / 1e9); }

int run() {
  const int reps = absl::GetFlag(FLAGS_reps);
  std::vector<int64_t> numels = bucket_numels(resnet50_gradient_shapes());
  Buffers b = make_buffers(numels);
  const k::Isa fast = k::best_isa();
  absl::PrintF("hook_bench: %d buckets, %.1fM float32 values (%.1f MB), kernels %s, best of %d\n",
               numels.size(), b.bytes / 4e6, b.bytes / 1e6, k::isa_name(fast), reps);

  std::map<std::string, double> ours = best_rates(
      {
          {"memcpy",
           [&] {
             for (size_t i = 0; i < b.src.size(); ++i)
               std::memcpy(b.dst[i].data(), b.src[i].data(), b.src[i].size() * 4);
           }},
          {"allreduce",
           [&] {
             for (auto& d : b.dst)
               k::divide(d.data(), static_cast<int64_t>(d.size()), kWorld, fast);
           }},
          {"fp16", [&] { cast_round_trip(b, true, fast); }},
          {"bf16", [&] { cast_round_trip(b, false, fast); }},
          {"int8", [&] { quantize_round_trip(b, fast); }},
          {"fp16_scalar", [&] { cast_round_trip(b, true, k::Isa::kScalar); }},
          {"int8_scalar", [&] { quantize_round_trip(b, k::Isa::kScalar); }},
      },
      b.bytes, reps);
  const double memcpy_rate = ours["memcpy"];
  const double fp16_scalar = ours["fp16_scalar"];
  const double int8_scalar = ours["int8_scalar"];

  std::map<std::string, double> torch;
  if (absl::GetFlag(FLAGS_torch)) torch = torch_rates(numels, reps);

  absl::PrintF("%-10s %14s %10s %14s %10s\n", "hook", "ours", "vs memcpy", "torch", "ours/torch");
  absl::PrintF("%-10s %14s %10s %14s\n", "memcpy", gbs(memcpy_rate), "1.00",
               torch.count("memcpy") ? gbs(torch["memcpy"]) : "n/a");
  for (const char* hook : {"allreduce", "fp16", "bf16", "int8"}) {
    const bool have = torch.count(hook) > 0;
    absl::PrintF("%-10s %14s %10.2f %14s %10s\n", hook, gbs(ours[hook]),
                 ours[hook] / memcpy_rate, have ? gbs(torch[hook]) : "n/a",
                 have ? absl::StrFormat("%.2f", ours[hook] / torch[hook]) : "n/a");
  }
  absl::PrintF("scalar path: fp16 %s (%.2f of memcpy), int8 %s (%.2f of memcpy)\n",
               gbs(fp16_scalar), fp16_scalar / memcpy_rate, gbs(int8_scalar),
               int8_scalar / memcpy_rate);
  absl::PrintF("noop: no work (returns the bucket)\n");
  if (torch.empty() && absl::GetFlag(FLAGS_torch)) {
    absl::PrintF("torch: not importable by python3; torch columns skipped\n");
  }
  // PowerSGD: its own work vs its two GEMMs, and vs torch's hook
  // (examples/benchmarks/powersgd_bench_part.h).
  PowerSGDBenchConfig psgd_config;
  psgd_config.with_torch = absl::GetFlag(FLAGS_torch);
  absl::StatusOr<PowerSGDBenchResult> psgd = run_powersgd_bench(psgd_config);
  std::string psgd_fields = "powersgd_vs_gemm=n/a powersgd_vs_torch=n/a";
  if (psgd.ok()) {
    absl::PrintF("%s", psgd->report());
    psgd_fields = psgd->result_fields();
    if (psgd->torch_ms <= 0) psgd_fields += " powersgd_vs_torch=n/a";
  } else {
    absl::PrintF("PowerSGD bench failed: %s\n", psgd.status().ToString());
  }
  auto ratio = [&](const char* hook) {
    return torch.count(hook) ? absl::StrFormat("%.2f", ours[hook] / torch[hook])
                             : std::string("n/a");
  };
  absl::PrintF(
      "RESULT fp16_vs_memcpy=%.2f bf16_vs_memcpy=%.2f int8_vs_memcpy=%.2f "
      "fp16_vs_torch=%s bf16_vs_torch=%s int8_vs_torch=%s %s\n",
      ours["fp16"] / memcpy_rate, ours["bf16"] / memcpy_rate, ours["int8"] / memcpy_rate,
      ratio("fp16"), ratio("bf16"), ratio("int8"), psgd_fields);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace ddpx

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddpx::bench::run();
}
