#include "examples/benchmarks/collective_bench_shm.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// The Open MPI anchor as a server (mpi_allreduce_anchor --serve), on rank 0:
// one mpirun per sweep, one command per size and round, sent right after
// ours ran that size, so that both meet the same load.
class MpiAnchor {
 public:
  // False (and a message on stderr) when the anchor could not start.
  bool start(int nproc, const std::string& anchor) {
    char dir_template[] = "/tmp/ddpx_mpi_anchor.XXXXXX";
    if (mkdtemp(dir_template) == nullptr) return fail(absl::StrCat("mkdtemp: ", strerror(errno)));
    dir_ = dir_template;
    for (int r = 0; r < nproc; ++r) {
      const std::string fifo = absl::StrCat(dir_, "/cmd.", r);
      if (mkfifo(fifo.c_str(), 0600) != 0) return fail(absl::StrCat("mkfifo ", fifo, ": ", strerror(errno)));
      fifos_.push_back(fifo);
    }
    command_ = absl::StrCat(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
        "mpirun --oversubscribe --bind-to none -np ", nproc, " ", anchor, " --serve=", dir_,
        " 2>&1");
    pipe_ = popen(command_.c_str(), "r");
    if (pipe_ == nullptr) return fail(absl::StrCat("popen: ", strerror(errno)));
    // Each rank opens its FIFO once it runs; a writer's non-blocking open
    // fails with ENXIO until then.
    const auto give_up = Clock::now() + std::chrono::seconds(60);
    for (const std::string& fifo : fifos_) {
      int fd = -1;
      while ((fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO &&
             Clock::now() < give_up) {
        usleep(2000);
      }
      if (fd < 0) return fail(absl::StrCat("no anchor rank opened ", fifo, " within 60 s"));
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      fds_.push_back(fd);
    }
    return true;
  }

  // `iters` timed calls of `bytes` on every anchor rank; their per-call
  // times (seconds), or empty when the anchor failed (said once).
  std::vector<double> run(int64_t bytes, int iters) {
    std::vector<double> out;
    if (pipe_ == nullptr) return out;
    const std::string line = absl::StrCat(bytes, " ", iters, "\n");
    for (int fd : fds_) {
      if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        fail(absl::StrCat("write to the anchor: ", strerror(errno)));
        return out;
      }
    }
    char text[1 << 16];
    while (fgets(text, sizeof(text), pipe_) != nullptr) {
      std::istringstream in(text);
      int64_t got = 0;
      if (!(in >> got)) {
        other_output_ += text;
        continue;
      }
      double us;
      while (in >> us) out.push_back(us / 1e6);
      return out;
    }
    fail("the anchor ended before it answered");
    return {};
  }

  ~MpiAnchor() { stop(); }

 private:
  bool fail(const std::string& why) {
    stop();
    fprintf(stderr, "collective_bench: the Open MPI anchor failed (%s; %s):\n%s\n", why.c_str(),
            command_.c_str(), other_output_.c_str());
    return false;
  }
  void stop() {
    for (int fd : fds_) close(fd);  // each rank's read ends: it exits
    fds_.clear();
    if (pipe_ != nullptr) {
      char text[1 << 12];
      while (fgets(text, sizeof(text), pipe_) != nullptr) other_output_ += text;
      const int status = pclose(pipe_);
      pipe_ = nullptr;
      if (status != 0) {
        fprintf(stderr, "collective_bench: the Open MPI anchor exited with status %d:\n%s\n",
                status, other_output_.c_str());
      }
    }
    for (const std::string& fifo : fifos_) unlink(fifo.c_str());
    fifos_.clear();
    if (!dir_.empty()) rmdir(dir_.c_str());
    dir_.clear();
  }

  std::string dir_, command_, other_output_;
  std::vector<std::string> fifos_;
  std::vector<int> fds_;
  FILE* pipe_ = nullptr;
};

// Linux cross-memory attach (process_vm_readv), the single copy Open MPI's
// shared-memory transport uses for large messages, of `n` bytes from this
// process into itself (the kernel pins and copies the pages as it would a
// peer's). False when the kernel refuses it.
bool cma_copy(void* dst, const void* src, size_t n) {
  iovec local{dst, n}, remote{const_cast<void*>(src), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
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
  auto core_barrier = [&] {
    absl::Status s = shm::barrier(core.channel(0), shm::Deadline::after(std::chrono::seconds(120)));
    if (!s.ok()) {
      fprintf(stderr, "collective_bench: %s\n", s.ToString().c_str());
      _exit(1);
    }
  };
  std::map<int64_t, std::vector<double>> shm_calls, tcp_calls, mpi_calls, core_calls,
      barrier_calls, copy_calls, cma_calls;
  std::vector<double> memcpy_calls, api_calls;
  // The other floor: what the Work / future / worker-queue machinery alone
  // costs per op, timed as an 8 B allreduce on a group of one rank (which
  // moves nothing), on rank 0 while the others wait.
  std::shared_ptr<GlooBackend> alone;
  MpiAnchor anchor;
  bool mpi_ok = !o.mpi_anchor.empty();
  if (rank == 0) {
    GlooOptions one;
    one.hostname = "127.0.0.1";
    alone = GlooBackend::create(std::make_shared<HashStore>(std::chrono::seconds(10)), 0, 1,
                                std::chrono::seconds(10), one)
                .value();
    if (mpi_ok) mpi_ok = anchor.start(nproc, o.mpi_anchor);
  }
  std::map<int64_t, int> iters;
  std::vector<float> src, dst;
  if (rank == 0) {
    src.assign(16 << 20, 1.0f);
    dst.assign(16 << 20, 0.0f);
  }
  bool cma_ok = true;
  // Rank 0's floors at one size, while the other ranks wait: a memcpy of
  // the message on one core, and the same copy through cross-memory attach.
  auto time_floors = [&](int64_t bytes) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(bytes, src.size() * 4));
    for (int i = 0; i < iters[bytes]; ++i) {
      auto t0 = Clock::now();
      memcpy(dst.data(), src.data(), n);
      copy_calls[bytes].push_back(seconds_since(t0));
    }
    for (int i = 0; cma_ok && i < iters[bytes]; ++i) {
      auto t0 = Clock::now();
      if (!cma_copy(dst.data(), src.data(), n)) {
        printf("# process_vm_readv refused (%s): no cma column\n", strerror(errno));
        cma_ok = false;
        break;
      }
      cma_calls[bytes].push_back(seconds_since(t0));
    }
  };
  auto time_mpi = [&](int64_t bytes) {
    if (rank == 0 && mpi_ok) {
      std::vector<double> calls = anchor.run(bytes, iters[bytes]);
      mpi_ok = !calls.empty();
      mpi_calls[bytes].insert(mpi_calls[bytes].end(), calls.begin(), calls.end());
    }
    sync.barrier();
  };
  rusage usage_before{};
  getrusage(RUSAGE_SELF, &usage_before);
  for (int round = 0; round < o.rounds; ++round) {
    for (int64_t bytes : o.sizes) {
      const int64_t count = std::max<int64_t>(1, bytes / 4);
      Tensor t = Tensor::zeros({count}, DType::kFloat32);
      // The list is made once, as a caller that issues ops on the same
      // tensors keeps it (a TensorList of one tensor is two allocations: the
      // list and the tensor's shape), so that the per-call times compare
      // the op with Open MPI's call on a buffer it already has.
      const TensorList list{t};
      // Ours and Open MPI at this size back to back, Open MPI first in every
      // other round, so that a stretch of load meets both alike.
      if (round % 2 == 1) time_mpi(bytes);
      for (int k = 0; k < 4; ++k) {
        GlooBackend* backend = k == 0 ? &shm : k == 1 ? &tcp : nullptr;
        auto& calls = k == 0   ? shm_calls[bytes]
                      : k == 1 ? tcp_calls[bytes]
                      : k == 2 ? core_calls[bytes]
                               : barrier_calls[bytes];
        auto call = [&] {
          if (backend != nullptr) {
            must(backend->allreduce(list, {}));
          } else if (k == 2) {
            core_allreduce(t);
          } else {
            core_barrier();
          }
        };
        sync.barrier();
        // The round's first size follows the previous round's largest
        // size (its caches flushed), and its timed calls last only a
        // fraction of a millisecond: a few untimed calls first.
        if (bytes == o.sizes.front()) {
          for (int w = 0; w < 20; ++w) call();
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
          call();
          calls.push_back(seconds_since(t0));
        }
      }
      if (round % 2 == 0) time_mpi(bytes);
      if (rank == 0) time_floors(bytes);
      sync.barrier();
    }
    sync.barrier();
    if (rank == 0) {
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
  // Where a slow sweep loses: each rank's context switches (voluntary:
  // it slept or yielded; involuntary: preempted), page faults and CPU time
  // during the sweep (the largest over ranks).
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto cpu_s = [](const rusage& u) {
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double voluntary = sync.max_over_ranks(usage.ru_nvcsw - usage_before.ru_nvcsw);
  const double preempted = sync.max_over_ranks(usage.ru_nivcsw - usage_before.ru_nivcsw);
  const double faults = sync.max_over_ranks(usage.ru_minflt - usage_before.ru_minflt);
  const double cpu = sync.max_over_ranks(cpu_s(usage) - cpu_s(usage_before));

  const double memcpy_s = rank == 0 ? median(memcpy_calls) : 0;
  if (rank == 0) {
    printf("\n# float32 sum allreduce, %d ranks: our shared-memory path vs our TCP path and "
           "Open MPI 4.1, each size's rounds back to back (median per call, us); floors in the "
           "same rounds: a barrier of the ranks through shared memory (the hand-off every "
           "allreduce makes), and on rank 0 alone a memcpy of the message and the same copy by "
           "process_vm_readv (Open MPI's single copy)\n", nproc);
    printf("%-10s %11s %11s %11s %11s %9s %9s %9s %9s %10s %10s %10s\n", "bytes", "shm",
           "shm_core", "tcp", "open_mpi", "tcp/shm", "mpi/shm", "core/shm", "shm_GBps",
           "barrier", "memcpy", "cma");
  }
  double min_vs_mpi = INFINITY, log_sum = 0, min_vs_tcp = INFINITY;
  int points = 0;
  for (int64_t bytes : o.sizes) {
    const double s = sync.max_over_ranks(median(shm_calls[bytes]));
    const double t = sync.max_over_ranks(median(tcp_calls[bytes]));
    const double c = sync.max_over_ranks(median(core_calls[bytes]));
    const double b = sync.max_over_ranks(median(barrier_calls[bytes]));
    if (rank != 0) continue;
    const double m = mpi_calls.count(bytes) ? median(mpi_calls[bytes]) : NAN;
    const double copy = median(copy_calls[bytes]);
    const double cma = cma_calls.count(bytes) ? median(cma_calls[bytes]) : NAN;
    printf("%-10lld %11.2f %11.2f %11.2f %11.2f %9.3f %9.3f %9.3f %9.3f %10.2f %10.2f %10.2f\n",
           static_cast<long long>(bytes), s * 1e6, c * 1e6, t * 1e6, m * 1e6, t / s, m / s,
           c / s, bytes / s / 1e9, b * 1e6, copy * 1e6, cma * 1e6);
    min_vs_tcp = std::min(min_vs_tcp, t / s);
    if (std::isfinite(m)) {
      if (m / s < min_vs_mpi) {
        min_vs_mpi = m / s;
        // Where ours is worst against Open MPI: how close it is there to
        // its floors (1.0: ours takes no longer than a barrier, or than a
        // memcpy of the message on one core).
        result["at_min_bytes"] = static_cast<double>(bytes);
        result["at_min_barrier_vs_shm"] = b / s;
        result["at_min_memcpy_vs_shm"] = copy / s;
      }
      log_sum += std::log(m / s);
      ++points;
    }
    if (bytes == (1 << 20)) {
      result["shm_1MiB_vs_tcp"] = t / s;
      if (std::isfinite(cma)) result["cma_1MiB_vs_memcpy"] = cma / copy;
    }
    if (bytes == (64 << 20)) result["shm_64MiB_vs_memcpy"] = memcpy_s / s;
  }
  if (rank == 0) {
    printf("# per rank in this sweep (the most of any rank): %.0f voluntary and %.0f "
           "involuntary context switches, %.0f page faults, %.2f s of CPU\n",
           voluntary, preempted, faults, cpu);
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
