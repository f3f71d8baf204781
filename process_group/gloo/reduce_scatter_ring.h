// A real reduce-scatter for the Gloo backend: Gloo 0.5.0 has no unbound-
// buffer reduce-scatter (only the classic ReduceScatterHalvingDoubling,
// which reduces in place, wants a power-of-two-friendly layout and has no
// per-call timeout), so this is a ring over Gloo's unbound buffers.
//
// n - 1 steps; at step s rank r receives from its left neighbour its partial
// sum of chunk (r - s - 2) mod n, adds its own input chunk and passes it on,
// so after the last step it holds the full reduction of chunk r. Each chunk
// travels in segments, and a segment is reduced and forwarded as soon as it
// arrives, so reduction and transfer overlap. Every rank moves (n-1)/n of
// the input, half of what allreduce-then-keep-a-chunk moves.
#ifndef DDPX_PROCESS_GROUP_GLOO_REDUCE_SCATTER_RING_H_
#define DDPX_PROCESS_GROUP_GLOO_REDUCE_SCATTER_RING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/options.h"

namespace gloo {
class Context;
}

namespace ddpx {

struct ReduceScatterCall {
  std::shared_ptr<gloo::Context> context;
  // context->size chunks of `count` elements back to back; chunk r is
  // reduced into rank r's output. Read only.
  const void* input = nullptr;
  // `count` elements; must not overlap `input`.
  void* output = nullptr;
  // `count` elements of scratch, needed when the world has more than 2
  // ranks (the ring alternates between it and `output`).
  void* scratch = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::SUM;  // AVG reduces as SUM; the caller divides
  uint32_t tag = 0;             // gloo tag, unique to this op on `context`
  std::chrono::milliseconds timeout{0};
  // Bytes per segment of a chunk (rounded down to whole elements).
  size_t segment_bytes = size_t{256} << 10;
};

// Runs the ring; throws gloo's exceptions (timeouts, closed connections).
void run_reduce_scatter_ring(const ReduceScatterCall& call);

// The same result by Gloo's classic ReduceScatterHalvingDoubling, which
// reduces in place: the input is first copied to `work` (size * count
// elements). One exchange per round on pre-registered pair buffers: on
// small messages it beats the ring, whose every transfer is a
// request/response over unbound buffers. Waits as long as its pairs allow
// and uses nextSlot(), so only for contexts used in one order on every rank
// whose pairs bound each wait by the op's timeout: sync pairs (like the
// classic allreduces).
void run_reduce_scatter_halving_doubling(const ReduceScatterCall& call, void* work);
// Where the backend switches from halving-doubling to the ring (bytes of
// the whole input), measured with collective_bench (docs/gloo.md).
inline constexpr size_t kReduceScatterClassicUpToBytes = size_t{128} << 10;

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_REDUCE_SCATTER_RING_H_
