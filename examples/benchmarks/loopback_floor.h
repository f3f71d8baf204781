// How fast this machine's kernel moves bytes over loopback TCP: one stream
// between two threads of this process (a writer and a reader, each with a
// core). Every Gloo algorithm on one host is bounded by it: an allreduce
// that moves B bytes in all through loopback takes at least B divided by
// this, before any reduction.
#ifndef DDPX_EXAMPLES_BENCHMARKS_LOOPBACK_FLOOR_H_
#define DDPX_EXAMPLES_BENCHMARKS_LOOPBACK_FLOOR_H_

#include <cstddef>

namespace ddpx {

// Bytes per second over one loopback TCP stream, `total_bytes` written in
// 4 MiB writes. Dies with a message if a socket call fails.
double loopback_tcp_bytes_per_second(size_t total_bytes);

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_LOOPBACK_FLOOR_H_
