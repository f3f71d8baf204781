// The hostile phase of store_bench: request shapes that used to crash or
// stall the server (amplifying MULTI_GETs from clients that never read,
// million-key CHECK, WAIT and MULTI_SET frames) against a fresh server
// process, while one well-behaved client PINGs it in a closed loop.
#ifndef DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_HOSTILE_H_
#define DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_HOSTILE_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"

namespace ddpx {
namespace bench {

struct HostileFigures {
  int pings = 0;              // PINGs answered during the phase
  double ping_p50_ms = 0;
  double ping_p99_ms = 0;     // of the well-behaved client's PING round trips
  double ping_max_ms = 0;
  double rss_growth_mib = 0;  // the server's peak RSS over its RSS before
  double seconds = 0;
};

// rss_mib: the server process's resident memory now, in MiB.
absl::StatusOr<HostileFigures> measure_hostile(uint16_t port,
                                               const std::function<double()>& rss_mib);

}  // namespace bench
}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_HOSTILE_H_
