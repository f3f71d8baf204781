#include "examples/benchmarks/powersgd_bench_part.h"

#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hooks/grad_bucket.h"
#include "hooks/powersgd_hook.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_random.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/front_end/process_group.h"
#include "store/hash_store.h"

namespace ddpx {
namespace {

// Timing is CPU time of this process on one BLAS thread (torch gets one
// thread too): on a shared 2-core machine wall-clock time mostly measures
// the neighbours, CPU time measures the work.
double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
struct Clock {
  using time_point = double;
  static double now() { return cpu_ms(); }
};
double ms_since(double start) { return cpu_ms() - start; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<BucketLayout> ddp_float32_buckets(const std::vector<Shape>& shapes) {
  std::vector<BucketLayout> buckets(1);
  for (size_t k = shapes.size(); k-- > 0;) {
    const int64_t cap = buckets.size() == 1 ? (1 << 20) : (25 << 20);
    if (buckets.back().numel * 4 >= cap) buckets.emplace_back();
    BucketLayout& b = buckets.back();
    b.shapes.push_back(shapes[k]);
    b.offsets.push_back(b.numel);
    b.numel += shape_numel(shapes[k]);
  }
  return buckets;
}

namespace {

struct BenchBucket {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;
  std::vector<float> gradient;  // what backward would have produced
  Tensor buffer;
};

std::vector<BenchBucket> make_buckets(const std::vector<Shape>& shapes) {
  std::vector<BenchBucket> out;
  uint64_t seed = 1;
  for (BucketLayout& layout : ddp_float32_buckets(shapes)) {
    BenchBucket b;
    const int64_t at = layout.numel;
    b.shapes = std::move(layout.shapes);
    b.offsets = std::move(layout.offsets);
    b.gradient.resize(at);
    fill_standard_normal(b.gradient.data(), at, seed++);
    b.buffer = Tensor::zeros({at}, DType::kFloat32);
    out.push_back(std::move(b));
  }
  return out;
}

// One iteration of `hook` over every bucket; returns the time spent inside
// the hook (refilling the buckets with gradients is not timed).
absl::StatusOr<double> run_iteration(CommHook& hook, std::vector<BenchBucket>& buckets) {
  double total = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    BenchBucket& b = buckets[i];
    std::copy(b.gradient.begin(), b.gradient.end(), b.buffer.data_as<float>());
    GradBucket bucket(i, i + 1 == buckets.size(), b.buffer, b.offsets, b.shapes, {});
    const auto start = Clock::now();
    absl::Status s = hook.run(bucket)->wait();
    total += ms_since(start);
    if (!s.ok()) return s;
  }
  return total;
}

absl::StatusOr<double> time_hook(std::shared_ptr<ProcessGroup> pg,
                                 const PowerSGDBenchConfig& config,
                                 std::vector<BenchBucket>& buckets) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = config.rank;
  o.start_powerSGD_iter = 2;
  o.use_error_feedback = config.use_error_feedback;
  auto state = PowerSGDState::create(o);
  if (!state.ok()) return state.status();
  (*state)->set_log_sink([](const std::string&) {});
  PowerSGDHook hook(std::move(pg), *state);
  // Two plain iterations, one compressed warm-up (allocates the memories).
  for (int it = 0; it < 3; ++it) {
    auto t = run_iteration(hook, buckets);
    if (!t.ok()) return t.status();
  }
  std::vector<double> times;
  for (int it = 0; it < config.iterations; ++it) {
    auto t = run_iteration(hook, buckets);
    if (!t.ok()) return t.status();
    times.push_back(*t);
  }
  return median(times);
}

// How the anchor computes the two products.
enum class Products {
  kHookKernels,  // the hook's own (hooks/powersgd_kernels.h: streaming loops)
  kLibrary,      // OpenBLAS as a library user would call it: sgemv at rank 1, sgemm above
  kPlainSgemm,   // cblas_sgemm whatever the rank
};

void library_products(Products how, const float* m, const CompressedMatrix& mat, float* p,
                      float* q) {
  if (how == Products::kLibrary && mat.rank == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, mat.rows, mat.cols, 1.0f, m, mat.cols, q, 1,
                0.0f, p, 1);
    cblas_sgemv(CblasRowMajor, CblasTrans, mat.rows, mat.cols, 1.0f, m, mat.cols, p, 1,
                0.0f, q, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mat.rows, mat.rank, mat.cols, 1.0f,
              m, mat.cols, q, mat.rank, 0.0f, p, mat.rank);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mat.cols, mat.rank, mat.rows, 1.0f, m,
              mat.cols, p, mat.rank, 0.0f, q, mat.rank);
}

std::vector<CompressionPlan> bench_plans(const PowerSGDBenchConfig& config,
                                         std::vector<BenchBucket>& buckets) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = config.rank;
  std::vector<CompressionPlan> plans;
  for (BenchBucket& b : buckets) {
    plans.push_back(*plan_layerwise(b.offsets, b.shapes, b.buffer.numel(), o));
    std::copy(b.gradient.begin(), b.gradient.end(), b.buffer.data_as<float>());
  }
  return plans;
}

// P = M Q and Q = M^T P for every matrix the hook compresses, nothing else,
// each matrix's two products back to back (so the second one may find M in
// cache, which the hook cannot: its Ps are allreduced in between).
double time_gemms(const PowerSGDBenchConfig& config, std::vector<BenchBucket>& buckets,
                  Products how, int* matrices) {
  const std::vector<CompressionPlan> plans = bench_plans(config, buckets);
  *matrices = 0;
  for (const auto& p : plans) *matrices += static_cast<int>(p.matrices.size());
  std::vector<double> times;
  for (int it = 0; it < config.iterations + 1; ++it) {
    double total = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
      const float* m = buckets[i].buffer.data_as<float>();
      std::vector<float> p(plans[i].p_numel), q(plans[i].q_numel, 0.5f);
      const auto start = Clock::now();
      for (const CompressedMatrix& mat : plans[i].matrices) {
        float* pm = p.data() + mat.p_offset;
        float* qm = q.data() + mat.q_offset;
        if (how == Products::kHookKernels) {
          matmul_m_q(m + mat.offset, mat.rows, mat.cols, qm, mat.rank, pm);
          matmul_mt_p(m + mat.offset, mat.rows, mat.cols, pm, mat.rank, qm);
        } else {
          library_products(how, m + mat.offset, mat, pm, qm);
        }
      }
      total += ms_since(start);
    }
    if (it > 0) times.push_back(total);  // the first pass warms the caches
  }
  return median(times);
}

// The memory traffic a step with error feedback cannot avoid, and nothing
// else, over the same buffers in the same order as the hook: per bucket
//   pass 1  error += input            (read 2 |M|, write 1 |M|)
//   pass 2  read the error once       (read 1 |M|: the second product, after
//                                      the P allreduce, cannot be fused)
//   pass 3  out = f(error); error -= out (read 1 |M|, write 2 |M|)
// i.e. 7 |M| of traffic against the two products' 2 |M|. Without error
// feedback: read, read, write (3 |M|). The arithmetic is one operation per
// element, so this times the memory system alone.
// Reads x[0..n) once (8 independent partial sums, so the loop is vectorized
// and limited by memory, not by the latency of one running sum).
float read_pass(const float* __restrict x, int64_t n) {
  float acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[j + l];
  for (; j < n; ++j) acc[0] += x[j];
  return acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
}

double time_traffic_floor(const PowerSGDBenchConfig& config,
                          std::vector<BenchBucket>& buckets, double* bytes_moved) {
  std::vector<std::vector<float>> errors;
  for (const BenchBucket& b : buckets) errors.emplace_back(b.gradient.size(), 0.0f);
  std::vector<double> times;
  double bytes = 0;
  volatile float sink = 0;
  for (int it = 0; it < config.iterations + 1; ++it) {
    double total = 0;
    bytes = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
      BenchBucket& b = buckets[i];
      std::copy(b.gradient.begin(), b.gradient.end(), b.buffer.data_as<float>());
      float* __restrict in = b.buffer.data_as<float>();
      float* __restrict e = errors[i].data();
      const int64_t n = b.buffer.numel();
      const auto start = Clock::now();
      float* m = in;
      if (config.use_error_feedback) {
        for (int64_t j = 0; j < n; ++j) e[j] += in[j];
        m = e;
      } else {
        sink = sink + read_pass(m, n);
      }
      sink = sink + read_pass(m, n);
      if (config.use_error_feedback) {
        for (int64_t j = 0; j < n; ++j) {
          in[j] = 0.5f * e[j];
          e[j] -= in[j];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) in[j] = 0.5f;
      }
      total += ms_since(start);
      bytes += (config.use_error_feedback ? 7.0 : 3.0) * 4.0 * n;
    }
    if (it > 0) times.push_back(total);
  }
  *bytes_moved = bytes;
  return median(times);
}

// torch's powerSGD_hook on the same buckets, 1-rank gloo group, timed the
// same way (median over compressed iterations, refills not timed).
constexpr char kTorchScript[] = R"PY(
import math, os, socket, sys, time
import torch, torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
torch.set_num_threads(1)
lines = sys.stdin.read().split("\n")
rank, iterations, ef = (int(x) for x in lines[0].split())
buckets = [[tuple(int(d) for d in s.split("x")) for s in l.split()] for l in lines[1:] if l.strip()]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
class Bucket:
    def __init__(s, i, last, buf, shapes): s.i, s.last, s.buf, s.shapes = i, last, buf, shapes
    def index(s): return s.i
    def is_last(s): return s.last
    def buffer(s): return s.buf
    def gradients(s):
        out, at = [], 0
        for sh in s.shapes:
            n = math.prod(sh); out.append(s.buf[at:at + n].view(sh)); at += n
        return out
state = psgd.PowerSGDState(None, matrix_approximation_rank=rank, start_powerSGD_iter=2,
                           use_error_feedback=bool(ef), warm_start=True)
grads = [torch.randn(sum(math.prod(s) for s in b)) for b in buckets]
bufs = [torch.empty_like(g) for g in grads]
times = []
for it in range(3 + iterations):
    total = 0.0
    for i, b in enumerate(buckets):
        bufs[i].copy_(grads[i])
        t0 = time.process_time()
        psgd.powerSGD_hook(state, Bucket(i, i == len(buckets) - 1, bufs[i], b)).wait()
        total += time.process_time() - t0
    if it >= 3: times.append(total * 1e3)
times.sort()
print("torch_ms %.3f" % times[len(times) // 2])
dist.destroy_process_group()
)PY";

absl::StatusOr<double> time_torch(const PowerSGDBenchConfig& config,
                                  const std::vector<BenchBucket>& buckets) {
  char script_path[] = "/tmp/ddpx_powersgd_torch_XXXXXX";
  int fd = mkstemp(script_path);
  if (fd < 0) return absl::InternalError("cannot create a temporary file");
  FILE* script = fdopen(fd, "w");
  fputs(kTorchScript, script);
  fclose(script);
  std::ostringstream input;
  input << config.rank << " " << config.iterations << " "
        << (config.use_error_feedback ? 1 : 0) << "\n";
  for (const BenchBucket& b : buckets) {
    std::vector<std::string> words;
    for (const Shape& s : b.shapes) words.push_back(absl::StrJoin(s, "x"));
    input << absl::StrJoin(words, " ") << "\n";
  }
  char input_path[] = "/tmp/ddpx_powersgd_input_XXXXXX";
  fd = mkstemp(input_path);
  if (fd < 0) return absl::InternalError("cannot create a temporary file");
  FILE* in = fdopen(fd, "w");
  fputs(input.str().c_str(), in);
  fclose(in);
  const std::string command = absl::StrCat("python3 ", script_path, " < ", input_path,
                                           " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe) {
    char line[256];
    while (fgets(line, sizeof(line), pipe)) output += line;
    pclose(pipe);
  }
  unlink(script_path);
  unlink(input_path);
  double ms = 0;
  if (sscanf(output.c_str(), "torch_ms %lf", &ms) != 1) {
    return absl::UnavailableError("python3 with torch did not run the PowerSGD hook");
  }
  return ms;
}

}  // namespace

std::vector<Shape> resnet50_gradient_shapes() {
  std::vector<Shape> shapes;
  auto conv_bn = [&](int64_t out, int64_t in, int64_t k) {
    shapes.push_back({out, in, k, k});
    shapes.push_back({out});  // batch norm weight
    shapes.push_back({out});  // batch norm bias
  };
  conv_bn(64, 3, 7);
  int64_t in = 64;
  const int64_t widths[] = {64, 128, 256, 512};
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t w = widths[stage];
    for (int b = 0; b < blocks[stage]; ++b) {
      conv_bn(w, in, 1);
      conv_bn(w, w, 3);
      conv_bn(4 * w, w, 1);
      if (b == 0) conv_bn(4 * w, in, 1);  // downsample
      in = 4 * w;
    }
  }
  shapes.push_back({1000, 2048});
  shapes.push_back({1000});
  return shapes;
}

std::string PowerSGDBenchResult::result_fields() const {
  std::string out = absl::StrFormat(
      "powersgd_vs_gemm=%.3f powersgd_vs_sgemm=%.3f powersgd_traffic_floor_vs_gemm=%.3f "
      "powersgd_vs_traffic_floor=%.3f",
      powersgd_vs_gemm(), own_work_ms / sgemm_ms, traffic_floor_ms / gemm_ms,
      own_work_ms / traffic_floor_ms);
  if (torch_ms > 0) absl::StrAppendFormat(&out, " powersgd_vs_torch=%.2f", powersgd_vs_torch());
  return out;
}

std::string PowerSGDBenchResult::report() const {
  std::string out = absl::StrFormat(
      "PowerSGD, rank %lld, on %lld float32 gradient values in %d buckets "
      "(%d matrices compressed)\n"
      "  own work (no communication): %.2f ms\n"
      "  its two products alone: hook's streaming kernels %.2f ms, OpenBLAS "
      "(sgemv at rank 1, sgemm above) %.2f ms\n"
      "    anchor = the faster: %.2f ms  -> ratio %.3f (target <= 1.3)\n"
      "  the two products as plain cblas_sgemm: %.2f ms  -> ratio %.3f\n"
      "  memory-traffic floor (%s |M| per step, no arithmetic): %.2f ms = %.1f MB at "
      "%.2f GB/s\n"
      "    floor vs anchor %.3f (the best any implementation could reach); own work vs "
      "floor %.3f\n"
      "  ours on a 1-rank gloo group:  %.2f ms\n",
      static_cast<long long>(rank), static_cast<long long>(numel), buckets, compressed_matrices,
      own_work_ms, hook_products_ms, library_products_ms, gemm_ms, powersgd_vs_gemm(),
      sgemm_ms, own_work_ms / sgemm_ms, use_error_feedback ? "7" : "3", traffic_floor_ms,
      traffic_floor_bytes / 1e6, traffic_floor_bytes / (traffic_floor_ms * 1e6),
      traffic_floor_ms / gemm_ms, own_work_ms / traffic_floor_ms, ours_gloo_ms);
  if (torch_ms > 0) {
    absl::StrAppendFormat(&out, "  torch's hook, 1-rank gloo:    %.2f ms  -> ours %.2fx faster\n",
                          torch_ms, powersgd_vs_torch());
  } else {
    absl::StrAppendFormat(&out, "  torch: %s\n", torch_note);
  }
  return out;
}

absl::StatusOr<PowerSGDBenchResult> run_powersgd_bench(const PowerSGDBenchConfig& config) {
  if (config.iterations < 1 || config.rank < 1) {
    return absl::InvalidArgumentError("powersgd bench: iterations and rank must be >= 1");
  }
  openblas_set_num_threads(1);
  const std::vector<Shape> shapes =
      config.shapes.empty() ? resnet50_gradient_shapes() : config.shapes;
  std::vector<BenchBucket> buckets = make_buckets(shapes);
  PowerSGDBenchResult r;
  r.rank = config.rank;
  r.use_error_feedback = config.use_error_feedback;
  r.buckets = static_cast<int>(buckets.size());
  for (const BenchBucket& b : buckets) r.numel += b.buffer.numel();

  auto own = time_hook(nullptr, config, buckets);
  if (!own.ok()) return own.status();
  r.own_work_ms = *own;
  r.hook_products_ms = time_gemms(config, buckets, Products::kHookKernels,
                                  &r.compressed_matrices);
  r.library_products_ms = time_gemms(config, buckets, Products::kLibrary,
                                     &r.compressed_matrices);
  r.sgemm_ms = time_gemms(config, buckets, Products::kPlainSgemm, &r.compressed_matrices);
  // The anchor is the fastest way we have to compute the two products.
  r.gemm_ms = std::min(r.hook_products_ms, r.library_products_ms);
  r.traffic_floor_ms = time_traffic_floor(config, buckets, &r.traffic_floor_bytes);

  const auto timeout = std::chrono::seconds(60);
  auto store = std::make_shared<HashStore>(timeout);
  auto backend = create_gloo_backend(store, 0, 1, timeout);
  if (!backend.ok()) return backend.status();
  auto pg = std::make_shared<ProcessGroup>(*backend, store, timeout);
  auto gloo = time_hook(pg, config, buckets);
  if (!gloo.ok()) return gloo.status();
  r.ours_gloo_ms = *gloo;

  if (config.with_torch) {
    auto torch = time_torch(config, buckets);
    if (torch.ok()) {
      r.torch_ms = *torch;
    } else {
      r.torch_note = std::string(torch.status().message());
    }
  } else {
    r.torch_note = "not requested";
  }
  return r;
}

}  // namespace ddpx
