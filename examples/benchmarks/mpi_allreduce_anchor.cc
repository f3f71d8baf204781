// The Open MPI anchor of collective_bench: one round of in-place float32 sum
// MPI_Allreduce per size, timed call by call like collective_bench times
// ours. collective_bench launches it with mpirun once per round and takes
// the median over rounds of calls.
//
//   mpirun -np 2 mpi_allreduce_anchor --sizes=8,32,... --round_ms=40
//
// Prints one line per size: "<bytes> <t1_us> <t2_us> ..." with every timed
// call of the slowest rank (rank 0 prints; each call's time is the max over
// ranks of that call).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<long long> parse_sizes(const char* list) {
  std::vector<long long> sizes;
  for (const char* p = list; *p != '\0';) {
    char* end = nullptr;
    sizes.push_back(std::strtoll(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *end != '\0') break;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<long long> sizes = {8};
  double round_s = 0.04;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--sizes=", 8) == 0) sizes = parse_sizes(argv[i] + 8);
    if (strncmp(argv[i], "--round_ms=", 11) == 0) round_s = atof(argv[i] + 11) / 1e3;
  }
  for (long long bytes : sizes) {
    const int count = static_cast<int>(std::max(1LL, bytes / 4));
    std::vector<float> buffer(count, 0.0f);
    // Warm-up calls; the fastest of three sizes the round, as in
    // collective_bench.
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = 0, warm = INFINITY;
    for (int w = 0; w < 3; ++w) {
      t0 = now_s();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double call = now_s() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      warm = std::min(warm, call);
    }
    const int iters = static_cast<int>(std::clamp(round_s / std::max(warm, 1e-7), 3.0, 200.0));
    std::vector<double> calls(iters);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; ++i) {
      t0 = now_s();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      calls[i] = now_s() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, calls.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%lld", static_cast<long long>(count) * 4);
      for (double c : calls) printf(" %.3f", c * 1e6);
      printf("\n");
      fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
