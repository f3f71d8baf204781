// collective_bench's shared-memory sweep: float32 sum allreduce on our
// shared-memory path, our TCP path and Open MPI (mpirun of
// mpi_allreduce_anchor), with floors measured in the same rounds, in
// alternating rounds.
#ifndef DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_SHM_H_
#define DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_SHM_H_

#include <map>
#include <string>
#include <vector>

#include "examples/benchmarks/collective_bench_raw.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/shm/shm_group.h"

namespace ddpx {

struct ShmSweepOptions {
  std::vector<int64_t> sizes;  // bytes
  int rounds = 5;
  double round_ms = 40;
  std::string mpi_anchor;      // path of mpi_allreduce_anchor; empty: no anchor
};

// `sync` gives the barriers and max over ranks; `core` is a shared-memory
// group of its own whose collectives are timed called directly (the floor of
// `shm`'s per-op cost), and whose barrier is the hand-off floor. Open MPI
// runs as a server (mpi_allreduce_anchor --serve) that times each size right
// before or after ours. Runs on every rank (collectively); prints the table
// on rank 0 and returns there the RESULT keys shm_vs_mpi_min,
// shm_vs_mpi_geomean, shm_1MiB_vs_tcp, shm_64MiB_vs_memcpy,
// shm<n>_vs_tcp<n>_min, cma_1MiB_vs_memcpy, and where shm_vs_mpi_min is
// taken at_min_bytes, at_min_barrier_vs_shm and at_min_memcpy_vs_shm (the
// floors there; those it could measure).
std::map<std::string, double> bench_shm_vs_mpi(int rank, int nproc, GlooBackend& shm,
                                               GlooBackend& tcp, RawGloo& sync,
                                               shm::ShmGroup& core,
                                               const ShmSweepOptions& options);

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_SHM_H_
