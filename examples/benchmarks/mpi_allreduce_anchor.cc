// The Open MPI anchor of collective_bench: in-place float32 sum
// MPI_Allreduce, timed call by call like collective_bench times ours.
//
//   mpirun -np 2 mpi_allreduce_anchor --sizes=8,32,... --round_ms=40
//     one round over the sizes, then exits.
//   mpirun -np 2 mpi_allreduce_anchor --serve=<dir>
//     rank r reads commands from the FIFO <dir>/cmd.<r>, each "<bytes>
//     <calls>": a barrier, two untimed calls, then <calls> timed ones; it
//     exits at the FIFO's end. collective_bench sends each size's command
//     right after timing ours at that size, so both meet the same load
//     (a load that comes and goes within a sweep hits one side only when
//     they run seconds apart). Between commands every rank is blocked in
//     read(), not polling in an MPI call, so it takes no CPU from ours.
//
// Prints one line per size (or command): "<bytes> <t1_us> <t2_us> ..." with
// every timed call of the slowest rank (rank 0 prints; each call's time is
// the max over ranks of that call).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
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

// `iters` timed calls on `buffer` after a barrier; rank 0 prints the line.
void time_calls(int rank, std::vector<float>& buffer, int iters) {
  const int count = static_cast<int>(buffer.size());
  std::vector<double> calls(iters);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_s();
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

// --serve: one command per line of this rank's FIFO until its end.
void serve(int rank, const std::string& dir) {
  const std::string path = dir + "/cmd." + std::to_string(rank);
  FILE* in = fopen(path.c_str(), "r");
  if (in == nullptr) {
    fprintf(stderr, "mpi_allreduce_anchor: rank %d cannot open %s\n", rank, path.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::map<long long, std::vector<float>> buffers;  // per size, kept: no fresh pages per round
  long long bytes = 0;
  int iters = 0;
  while (fscanf(in, "%lld %d", &bytes, &iters) == 2) {
    std::vector<float>& buffer = buffers[bytes];
    if (buffer.empty()) buffer.assign(static_cast<size_t>(std::max(1LL, bytes / 4)), 0.0f);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int w = 0; w < 2; ++w) {
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
    }
    time_calls(rank, buffer, std::max(1, iters));
  }
  fclose(in);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<long long> sizes = {8};
  double round_s = 0.04;
  std::string serve_dir;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--sizes=", 8) == 0) sizes = parse_sizes(argv[i] + 8);
    if (strncmp(argv[i], "--round_ms=", 11) == 0) round_s = atof(argv[i] + 11) / 1e3;
    if (strncmp(argv[i], "--serve=", 8) == 0) serve_dir = argv[i] + 8;
  }
  if (!serve_dir.empty()) {
    serve(rank, serve_dir);
    MPI_Finalize();
    return 0;
  }
  for (long long bytes : sizes) {
    const int count = static_cast<int>(std::max(1LL, bytes / 4));
    std::vector<float> buffer(count, 0.0f);
    // Warm-up calls; the fastest of three sizes the round, as in
    // collective_bench.
    MPI_Barrier(MPI_COMM_WORLD);
    double warm = INFINITY;
    for (int w = 0; w < 3; ++w) {
      const double t0 = now_s();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double call = now_s() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      warm = std::min(warm, call);
    }
    time_calls(rank, buffer,
               static_cast<int>(std::clamp(round_s / std::max(warm, 1e-7), 3.0, 200.0)));
  }
  MPI_Finalize();
  return 0;
}
