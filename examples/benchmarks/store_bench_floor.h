// The floor under store_bench's throughput figures: a "server" that does only
// the socket work any TCPStore server must do per request (its share of an
// epoll_wait, one recv, one send) and no store work at all. It answers each
// request of the benchmark's closed loop with a canned reply of the right
// size, chosen from the request's first byte; it decodes nothing and keeps
// no keys, so it is no server, only a measuring stick: no real server can
// beat it with the same load generator on the same machine. Its throughput
// over torch's bounds the ratio any server could reach there.
#ifndef DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_FLOOR_H_
#define DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_FLOOR_H_

namespace ddpx {
namespace bench {

// Listens on 127.0.0.1 (a free port), prints "floor server listening on port
// N" on stdout and serves until killed. Returns only on a setup error (1).
int run_canned_reply_server();

}  // namespace bench
}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_STORE_BENCH_FLOOR_H_
