#include "examples/benchmarks/collective_bench_raw.h"

#include "gloo/allgather.h"
#include "gloo/allgather_ring.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/reduce_scatter.h"
#include "gloo/scatter.h"

namespace ddpx {

void RawGloo::allreduce(AllreduceAlgorithm algorithm, float* data, size_t count) {
  const std::vector<float*> ptrs = {data};
  const int n = static_cast<int>(count);
  switch (algorithm) {
    case AllreduceAlgorithm::kGlooRing:
    case AllreduceAlgorithm::kGlooRing4M:
    case AllreduceAlgorithm::kGlooRing16M:
    case AllreduceAlgorithm::kGlooBcube: {
      gloo::AllreduceOptions o(context_);
      o.setOutput(data, count);
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      o.setTag(next_tag());
      if (algorithm == AllreduceAlgorithm::kGlooBcube) {
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      }
      if (size_t segment = allreduce_segment_bytes(algorithm); segment > 0) {
        o.setMaxSegmentSize(segment);
      }
      gloo::allreduce(o);
      return;
    }
    case AllreduceAlgorithm::kRing:
      gloo::AllreduceRing<float>(context_, ptrs, n).run();
      return;
    case AllreduceAlgorithm::kRingChunked:
      gloo::AllreduceRingChunked<float>(context_, ptrs, n).run();
      return;
    case AllreduceAlgorithm::kHalvingDoubling:
      gloo::AllreduceHalvingDoubling<float>(context_, ptrs, n).run();
      return;
    case AllreduceAlgorithm::kBcube:
      gloo::AllreduceBcube<float>(context_, ptrs, n).run();
      return;
  }
}

void RawGloo::reduce_scatter_halving_doubling(float* data, size_t count) {
  const std::vector<int> per_rank(context_->size, static_cast<int>(count / context_->size));
  gloo::ReduceScatterHalvingDoubling<float>(context_, {data}, static_cast<int>(count), per_rank)
      .run();
}

void RawGloo::broadcast(float* data, size_t count, int root) {
  gloo::BroadcastOptions o(context_);
  o.setOutput(data, count);
  o.setRoot(root);
  o.setTag(next_tag());
  gloo::broadcast(o);
}

void RawGloo::reduce(float* data, size_t count, int root) {
  gloo::ReduceOptions o(context_);
  o.setOutput(data, count);
  o.setRoot(root);
  o.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  o.setTag(next_tag());
  gloo::reduce(o);
}

void RawGloo::allgather(const float* in, float* out, size_t count) {
  gloo::AllgatherOptions o(context_);
  o.setInput(const_cast<float*>(in), count);
  o.setOutput(out, count * context_->size);
  o.setTag(next_tag());
  gloo::allgather(o);
}

void RawGloo::gather(const float* in, float* out, size_t count, int root) {
  gloo::GatherOptions o(context_);
  o.setInput(const_cast<float*>(in), count);
  if (context_->rank == root) o.setOutput(out, count * context_->size);
  o.setRoot(root);
  o.setTag(next_tag());
  gloo::gather(o);
}

void RawGloo::scatter(float* const* in, float* out, size_t count, int root) {
  gloo::ScatterOptions o(context_);
  if (context_->rank == root) {
    std::vector<float*> ptrs(in, in + context_->size);
    o.setInputs(ptrs, count);
  }
  o.setOutput(out, count);
  o.setRoot(root);
  o.setTag(next_tag());
  gloo::scatter(o);
}

void RawGloo::alltoall(const float* in, float* out, size_t count) {
  gloo::AlltoallOptions o(context_);
  o.setInput(const_cast<float*>(in), count);
  o.setOutput(out, count);
  o.setTag(next_tag());
  gloo::alltoall(o);
}

void RawGloo::broadcast_classic(float* data, size_t count, int root) {
  gloo::BroadcastOneToAll<float>(context_, {data}, count, root).run();
}

void RawGloo::allgather_classic(const float* in, float* out, size_t count) {
  gloo::AllgatherRing<float>(context_, {in}, out, static_cast<int>(count)).run();
}

void RawGloo::barrier_classic() { gloo::BarrierAllToOne(context_).run(); }

void RawGloo::barrier() {
  gloo::BarrierOptions o(context_);
  o.setTag(next_tag());
  gloo::barrier(o);
}

double RawGloo::max_over_ranks(double value) {
  gloo::AllreduceOptions o(context_);
  o.setOutput(&value, 1);
  o.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
  o.setTag(next_tag());
  gloo::allreduce(o);
  return value;
}

}  // namespace ddpx
