// allreduce_bench: the nccl backend's allreduce with one rank per visible GPU
// (threads of this process, a HashStore for the rendezvous), against a
// device-to-device copy of the same bytes on GPU 0 in the same run (the
// anchor: what moving the buffer once costs). Prints a table and
//   RESULT gpus=N bytes=B allreduce_ms=... busbw_gbps=... memcpy_gbps=...
// for the largest size. Without a GPU it says so: `RESULT gpu=none`.
//
//   bazel run --config=cuda //examples/benchmarks:allreduce_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "cuda/check.h"
#include "examples/benchmarks/bench_support.h"
#include "process_group/nccl/nccl_backend.h"
#include "store/hash_store.h"

ABSL_FLAG(int64_t, max_bytes, 256 << 20, "largest message");
ABSL_FLAG(int, reps, 10, "timed repetitions per size (the best is kept)");

namespace ddpx {
namespace nccl {
namespace {

using Clock = std::chrono::steady_clock;

int run() {
  if (report_no_gpu()) return 0;
  const int gpus = cuda_device_count();
  const int reps = absl::GetFlag(FLAGS_reps);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_bytes);
  auto store = std::make_shared<HashStore>();
  std::vector<std::shared_ptr<NcclBackend>> backends(gpus);
  for (int r = 0; r < gpus; ++r) {
    NcclOptions options;
    absl::StatusOr<std::shared_ptr<NcclBackend>> b = NcclBackend::create(store, r, gpus, options);
    exit_on_error(b.status(), "create backend");
    backends[r] = *b;
  }
  printf("%12s %12s %12s %12s\n", "bytes", "allreduce ms", "busbw GB/s", "memcpy GB/s");
  double last_ms = 0, last_busbw = 0, last_memcpy = 0;
  int64_t last_bytes = 0;
  for (int64_t bytes = 1 << 20; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    double best = 1e30;
    std::vector<std::thread> threads;
    std::vector<double> times(gpus, 1e30);
    for (int r = 0; r < gpus; ++r) {
      threads.emplace_back([&, r] {
        Tensor t = *Tensor::empty({n}, DType::kFloat32, Device::cuda(r));
        t.zero_();
        for (int i = 0; i <= reps; ++i) {
          auto t0 = Clock::now();
          auto work = backends[r]->allreduce({t}, AllreduceOptions{ReduceOp::SUM,
                                                                  std::chrono::minutes(5)});
          // Completed by the watchdog once the GPU is done: poll the events
          // directly instead, to time the GPU and not the poll interval.
          DeviceGuard guard(r);
          exit_on_error(work->wait(), "allreduce");
          exit_on_error(DDPX_CUDA_CHECK(cudaDeviceSynchronize()), "synchronize");
          if (i > 0) {
            times[r] = std::min(times[r],
                                std::chrono::duration<double>(Clock::now() - t0).count());
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    best = *std::max_element(times.begin(), times.end());
    // Anchor: one device-to-device copy of the same bytes on GPU 0.
    double memcpy_best = 1e30;
    {
      DeviceGuard guard(0);
      Tensor a = *Tensor::empty({n}, DType::kFloat32, Device::cuda(0));
      Tensor b = *Tensor::empty({n}, DType::kFloat32, Device::cuda(0));
      for (int i = 0; i <= reps; ++i) {
        auto t0 = Clock::now();
        exit_on_error(DDPX_CUDA_CHECK(cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice)),
              "memcpy");
        exit_on_error(DDPX_CUDA_CHECK(cudaDeviceSynchronize()), "synchronize");
        if (i > 0)
          memcpy_best = std::min(memcpy_best,
                                 std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
    const double busbw = gpus > 1 ? 2.0 * (gpus - 1) / gpus * bytes / best / 1e9 : bytes / best / 1e9;
    const double memcpy_gbps = 2.0 * bytes / memcpy_best / 1e9;  // read + write
    printf("%12lld %12.3f %12.1f %12.1f\n", static_cast<long long>(bytes), best * 1e3, busbw,
           memcpy_gbps);
    last_ms = best * 1e3;
    last_busbw = busbw;
    last_memcpy = memcpy_gbps;
    last_bytes = bytes;
  }
  printf("RESULT gpus=%d bytes=%lld allreduce_ms=%.3f busbw_gbps=%.1f memcpy_gbps=%.1f\n", gpus,
         static_cast<long long>(last_bytes), last_ms, last_busbw, last_memcpy);
  return 0;
}

}  // namespace
}  // namespace nccl
}  // namespace ddpx

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddpx::nccl::run();
}
