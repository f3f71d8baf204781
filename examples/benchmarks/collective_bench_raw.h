// The raw-Gloo side of collective_bench: each collective called directly on
// the caller's thread with Gloo's own reduction functions, the way a program
// using libgloo alone would, on a context of its own.
#ifndef DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_RAW_H_
#define DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_RAW_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "process_group/gloo/allreduce_algorithms.h"

namespace gloo {
class Context;
}

namespace ddpx {

class RawGloo {
 public:
  explicit RawGloo(std::shared_ptr<gloo::Context> context)
      : context_(std::move(context)) {}

  // float32 SUM with gloo::sum / ReductionFunction<float>::sum.
  void allreduce(AllreduceAlgorithm algorithm, float* data, size_t count);
  // Gloo's classic ReduceScatterHalvingDoubling over `count` elements in
  // place (equal chunks per rank).
  void reduce_scatter_halving_doubling(float* data, size_t count);
  void broadcast(float* data, size_t count, int root);
  void reduce(float* data, size_t count, int root);
  void allgather(const float* in, float* out, size_t count);
  void gather(const float* in, float* out, size_t count, int root);
  void scatter(float* const* in, float* out, size_t count, int root);
  // `count` elements in and out in all, count / size per peer.
  void alltoall(const float* in, float* out, size_t count);
  void barrier();
  // Gloo's classic classes for the same ops (BroadcastOneToAll,
  // AllgatherRing, BarrierAllToOne), as ours runs them on sync pairs.
  void broadcast_classic(float* data, size_t count, int root);
  void allgather_classic(const float* in, float* out, size_t count);
  void barrier_classic();
  // max over ranks, for collecting timings.
  double max_over_ranks(double value);

 private:
  uint32_t next_tag() { return tag_++; }
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 1;
};

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_COLLECTIVE_BENCH_RAW_H_
