// Many TCPStore clients driven from one thread with non-blocking sockets and
// epoll, speaking the wire protocol directly: how store_bench puts 16384
// clients on a server from one process. The same swarm drives our server and
// torch's, so the comparison measures the servers.
#ifndef DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_SWARM_H_
#define DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_SWARM_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpx {
namespace bench {

enum class Op { kSet, kGet, kAdd };

// Size of the values the closed loop sets and gets.
constexpr size_t kValueBytes = 64;
const char* op_name(Op op);

struct OpStats {
  uint64_t ops = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  // CPU time of the load generator (this thread) during the timed loop: how
  // close the client side itself came to saturating its core.
  double client_cpu_s = 0;
  double ops_per_s() const { return seconds > 0 ? ops / seconds : 0; }
};

class Swarm {
 public:
  Swarm(std::string host, uint16_t port);
  ~Swarm();

  // `n` clients connect (at most `window` handshakes in flight, like a
  // launcher staggering ranks), validate, ADD 1 to a counter and WAIT on a
  // barrier key that the last one to arrive sets. Returns the seconds from
  // the first connect until every client has been released. The
  // connections stay open (idle) until close_all().
  absl::StatusOr<double> rendezvous(int n, int window, const std::string& tag,
                                    std::chrono::seconds timeout);
  void close_all();

  // `clients` connections each run `op` back to back (closed loop) for
  // `seconds`. SET is followed by a PING so it has a reply to time.
  absl::StatusOr<OpStats> closed_loop(int clients, Op op, double seconds);

  size_t open_connections() const;

 private:
  struct Client;
  std::string host_;
  uint16_t port_;
  int epoll_fd_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace bench
}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_SWARM_H_
