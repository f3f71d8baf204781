#include "examples/benchmarks/collective_bench_shm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/shm/collectives.h"
#include "store/hash_store.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void must(const std::shared_ptr<Work>& work) {
  absl::Status s = work->wait();
  if (!s.ok()) {
    fprintf(stderr, "collective_bench: %s\n", s.ToString().c_str());
    _exit(1);
  }
}

// One mpirun of the anchor over every size; per size, its per-call times
// (seconds). Rank 0 only. Empty when the anchor could not run.
std::map<int64_t, std::vector<double>> run_mpi_round(int nproc, const ShmSweepOptions& o) {
  std::map<int64_t, std::vector<double>> out;
  const std::string command = absl::StrCat(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
      "mpirun --oversubscribe --bind-to none -np ", nproc, " ", o.mpi_anchor,
      " --sizes=", absl::StrJoin(o.sizes, ","), " --round_ms=", o.round_ms, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[1 << 16];
  std::string other_output;  // what is not a timing line: mpirun's own messages
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    std::istringstream in(line);
    int64_t bytes = 0;
    if (!(in >> bytes)) {
      other_output += line;
      continue;
    }
    double us;
    while (in >> us) out[bytes].push_back(us / 1e6);
  }
  const int status = pclose(pipe);
  if (status != 0) {
    fprintf(stderr, "collective_bench: the Open MPI anchor failed (status %d, %s):\n%s\n", status,
            command.c_str(), other_output.c_str());
    out.clear();
  }
  return out;
}

}  // namespace

std::map<std::string, double> bench_shm_vs_mpi(int rank, int nproc, GlooBackend& shm,
                                               GlooBackend& tcp, RawGloo& sync,
                                               shm::ShmGroup& core, const ShmSweepOptions& o) {
  std::map<std::string, double> result;
  if (!shm.uses_shared_memory()) {
    if (rank == 0) printf("\n# shared memory is off (%s): no shm sweep\n", shm.shared_memory_status().c_str());
    return result;
  }
  // The floor of our path: its collectives called directly on this thread
  // (no Work, future or worker queue), on a group of their own.
  const shm::Reduction sum{reduce_function(DType::kFloat32, ReduceOp::SUM), 4};
  auto core_allreduce = [&](Tensor& t) {
    absl::Status s = shm::allreduce(core.channel(0), t.data(), t.numel(), sum,
                                    shm::Deadline::after(std::chrono::seconds(120)));
    if (!s.ok()) {
      fprintf(stderr, "collective_bench: %s\n", s.ToString().c_str());
      _exit(1);
    }
  };
  std::map<int64_t, std::vector<double>> shm_calls, tcp_calls, mpi_calls, core_calls;
  std::vector<double> memcpy_calls, api_calls;
  // The other floor: what the Work / future / worker-queue machinery alone
  // costs per op, timed as an 8 B allreduce on a group of one rank (which
  // moves nothing), on rank 0 while the others wait.
  std::shared_ptr<GlooBackend> alone;
  if (rank == 0) {
    GlooOptions one;
    one.hostname = "127.0.0.1";
    alone = GlooBackend::create(std::make_shared<HashStore>(std::chrono::seconds(10)), 0, 1,
                                std::chrono::seconds(10), one)
                .value();
  }
  std::map<int64_t, int> iters;
  std::vector<float> src, dst;
  if (rank == 0) {
    src.assign(16 << 20, 1.0f);
    dst.assign(16 << 20, 0.0f);
  }
  bool mpi_ok = !o.mpi_anchor.empty();
  for (int round = 0; round < o.rounds; ++round) {
    for (int64_t bytes : o.sizes) {
      const int64_t count = std::max<int64_t>(1, bytes / 4);
      Tensor t = Tensor::zeros({count}, DType::kFloat32);
      // The list is made once, as a caller that issues ops on the same
      // tensors keeps it (a TensorList of one tensor is two allocations: the
      // list and the tensor's shape), so that the per-call times compare
      // the op with Open MPI's call on a buffer it already has.
      const TensorList list{t};
      for (int k = 0; k < 3; ++k) {
        GlooBackend* backend = k == 0 ? &shm : k == 1 ? &tcp : nullptr;
        auto& calls = k == 0 ? shm_calls[bytes] : k == 1 ? tcp_calls[bytes] : core_calls[bytes];
        sync.barrier();
        // The round's first size follows rank 0's memcpy of 64 MiB (its
        // caches flushed) and the Open MPI run, and its timed calls last
        // only a fraction of a millisecond: a few untimed calls first.
        if (bytes == o.sizes.front()) {
          for (int w = 0; w < 20; ++w) {
            if (backend != nullptr) {
              must(backend->allreduce(list, {}));
            } else {
              core_allreduce(t);
            }
          }
        }
        // Warm-up: the fastest of three calls sizes every round of this
        // size (one call that hits a hiccup would leave the rounds with a
        // few calls each, whose median the first calls after the barrier
        // then pull up).
        if (round == 0 && k == 0) {
          double warm = INFINITY;
          for (int w = 0; w < 3; ++w) {
            auto t0 = Clock::now();
            must(shm.allreduce(list, {}));
            warm = std::min(warm, sync.max_over_ranks(seconds_since(t0)));
          }
          core_allreduce(t);
          iters[bytes] = static_cast<int>(std::clamp(o.round_ms / 1e3 / std::max(warm, 1e-7), 3.0, 200.0));
          must(tcp.allreduce(list, {}));
          sync.barrier();
        }
        for (int i = 0; i < iters[bytes]; ++i) {
          auto t0 = Clock::now();
          if (backend != nullptr) {
            must(backend->allreduce(list, {}));
          } else {
            core_allreduce(t);
          }
          calls.push_back(seconds_since(t0));
        }
      }
    }
    sync.barrier();
    if (rank == 0) {
      if (mpi_ok) {
        auto mpi = run_mpi_round(nproc, o);
        mpi_ok = !mpi.empty();
        for (auto& [bytes, calls] : mpi) {
          mpi_calls[bytes].insert(mpi_calls[bytes].end(), calls.begin(), calls.end());
        }
      }
      for (int i = 0; i < 5; ++i) {
        auto t0 = Clock::now();
        memcpy(dst.data(), src.data(), src.size() * sizeof(float));
        memcpy_calls.push_back(seconds_since(t0));
      }
      Tensor eight = Tensor::zeros({2}, DType::kFloat32);
      for (int i = 0; i < 2000; ++i) {
        auto t0 = Clock::now();
        must(alone->allreduce({eight}, {}));
        api_calls.push_back(seconds_since(t0));
      }
    }
    sync.barrier();
  }
  if (!mpi_ok) mpi_calls.clear();

  const double memcpy_s = rank == 0 ? median(memcpy_calls) : 0;
  if (rank == 0) {
    printf("\n# float32 sum allreduce, %d ranks: our shared-memory path vs our TCP path and "
           "Open MPI 4.1 (median per call, us)\n", nproc);
    printf("%-10s %11s %11s %11s %11s %9s %9s %9s %9s\n", "bytes", "shm", "shm_core", "tcp",
           "open_mpi", "tcp/shm", "mpi/shm", "core/shm", "shm_GBps");
  }
  double min_vs_mpi = INFINITY, log_sum = 0, min_vs_tcp = INFINITY;
  int points = 0;
  for (int64_t bytes : o.sizes) {
    const double s = sync.max_over_ranks(median(shm_calls[bytes]));
    const double t = sync.max_over_ranks(median(tcp_calls[bytes]));
    const double c = sync.max_over_ranks(median(core_calls[bytes]));
    if (rank != 0) continue;
    const double m = mpi_calls.count(bytes) ? median(mpi_calls[bytes]) : NAN;
    printf("%-10lld %11.2f %11.2f %11.2f %11.2f %9.3f %9.3f %9.3f %9.3f\n",
           static_cast<long long>(bytes), s * 1e6, c * 1e6, t * 1e6, m * 1e6, t / s, m / s,
           c / s, bytes / s / 1e9);
    min_vs_tcp = std::min(min_vs_tcp, t / s);
    if (std::isfinite(m)) {
      min_vs_mpi = std::min(min_vs_mpi, m / s);
      log_sum += std::log(m / s);
      ++points;
    }
    if (bytes == (1 << 20)) result["shm_1MiB_vs_tcp"] = t / s;
    if (bytes == (64 << 20)) result["shm_64MiB_vs_memcpy"] = memcpy_s / s;
  }
  if (rank == 0) {
    printf("# memcpy of 64 MiB: %.2f ms (%.2f GB/s) on one core\n", memcpy_s * 1e3,
           (64 << 20) / memcpy_s / 1e9);
    printf("# an 8 B allreduce on a 1-rank group (the per-op machinery alone): %.3f us\n",
           median(api_calls) * 1e6);
    if (points > 0) {
      result["shm_vs_mpi_min"] = min_vs_mpi;
      result["shm_vs_mpi_geomean"] = std::exp(log_sum / points);
    } else {
      printf("# no Open MPI anchor (see above)\n");
    }
    result[absl::StrCat("shm", nproc, "_vs_tcp", nproc, "_min")] = min_vs_tcp;
    fflush(stdout);
  }
  return result;
}

}  // namespace ddpx
