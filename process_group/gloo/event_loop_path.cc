#include "process_group/gloo/event_loop_path.h"

#include <cstring>

#include "gloo/allgather.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/context.h"
#include "gloo/gather.h"
#include "gloo/reduce.h"
#include "gloo/scatter.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/gloo/reduce_scatter_ring.h"

namespace ddpx {
namespace {

uint8_t* bytes(const void* p) { return static_cast<uint8_t*>(const_cast<void*>(p)); }

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const uint8_t* x = static_cast<const uint8_t*>(a);
  const uint8_t* y = static_cast<const uint8_t*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

void EventLoopPath::allreduce(AllreduceAlgorithm algorithm, void* data, size_t count,
                              DType dtype, ReduceOp op) const {
  run_allreduce(algorithm, c_.allreduce_call(c_.context, data, count, dtype, op));
}

void EventLoopPath::broadcast(void* data, size_t nbytes, int root) const {
  if (nbytes == 0) return;
  gloo::BroadcastOptions o(c_.context);
  o.setOutput<uint8_t>(bytes(data), nbytes);
  o.setRoot(root);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::broadcast(o);
}

void EventLoopPath::reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) const {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    gloo::ReduceOptions o(c_.context);
    o.setOutput<T>(static_cast<T*>(data), count);
    o.setReduceFunction(reduce_function(dtype, op));
    o.setRoot(root);
    o.setTag(c_.tag);
    o.setTimeout(c_.timeout);
    gloo::reduce(o);
  });
}

void EventLoopPath::allgather(const void* in, void* out, size_t nbytes_per_rank,
                              uint32_t tag) const {
  gloo::AllgatherOptions o(c_.context);
  o.setInput<uint8_t>(bytes(in), nbytes_per_rank);
  o.setOutput<uint8_t>(bytes(out), nbytes_per_rank * c_.context->size);
  o.setTag(tag);
  o.setTimeout(c_.timeout);
  gloo::allgather(o);
}

int64_t EventLoopPath::reduce_scatter_scratch(const void* in, const void* out, size_t count,
                                              DType dtype, int size) {
  const size_t chunk_bytes = count * dtype_size(dtype);
  int64_t elements = size > 2 ? static_cast<int64_t>(count) : 0;
  if (in != nullptr && overlaps(in, chunk_bytes * size, out, chunk_bytes)) {
    elements += static_cast<int64_t>(count);
  }
  return elements;
}

void EventLoopPath::reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                                   ReduceOp op, uint32_t tag, void* scratch) const {
  const int size = c_.context->size;
  const size_t chunk_bytes = count * dtype_size(dtype);
  uint8_t* spare = static_cast<uint8_t*>(scratch);
  ReduceScatterCall call = c_.reduce_scatter_call(c_.context, in, out, count, dtype, op, tag);
  const bool aliased = overlaps(in, chunk_bytes * size, out, chunk_bytes);
  if (size > 2) {
    call.scratch = spare;
    spare += chunk_bytes;
  }
  if (aliased) call.output = spare;
  run_reduce_scatter_ring(call);
  if (aliased) memcpy(out, call.output, chunk_bytes);
}

void EventLoopPath::gather(const void* in, void* out, size_t nbytes_per_rank, int root) const {
  gloo::GatherOptions o(c_.context);
  o.setInput<uint8_t>(bytes(in), nbytes_per_rank);
  if (c_.context->rank == root) o.setOutput<uint8_t>(bytes(out), nbytes_per_rank * c_.context->size);
  o.setRoot(root);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::gather(o);
}

void EventLoopPath::scatter(const std::vector<uint8_t*>& inputs, void* out,
                            size_t nbytes_per_rank, int root) const {
  gloo::ScatterOptions o(c_.context);
  if (c_.context->rank == root) o.setInputs<uint8_t>(inputs, nbytes_per_rank);
  o.setOutput<uint8_t>(bytes(out), nbytes_per_rank);
  o.setRoot(root);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::scatter(o);
}

void EventLoopPath::alltoall(const void* in, size_t in_nbytes, void* out,
                             size_t out_nbytes) const {
  gloo::AlltoallOptions o(c_.context);
  o.setInput<uint8_t>(bytes(in), in_nbytes);
  o.setOutput<uint8_t>(bytes(out), out_nbytes);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::alltoall(o);
}

void EventLoopPath::alltoallv(const void* in, const std::vector<int64_t>& in_bytes, void* out,
                              const std::vector<int64_t>& out_bytes) const {
  int64_t total_in = 0, total_out = 0;
  for (int64_t b : in_bytes) total_in += b;
  for (int64_t b : out_bytes) total_out += b;
  if (total_in == 0 && total_out == 0) return;
  // Gloo wants real pointers even for an empty side.
  static uint8_t empty_side[1];
  gloo::AlltoallvOptions o(c_.context);
  o.setInput<uint8_t>(total_in > 0 ? bytes(in) : empty_side, in_bytes);
  o.setOutput<uint8_t>(total_out > 0 ? bytes(out) : empty_side, out_bytes);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::alltoallv(o);
}

void EventLoopPath::barrier() const {
  gloo::BarrierOptions o(c_.context);
  o.setTag(c_.tag);
  o.setTimeout(c_.timeout);
  gloo::barrier(o);
}

}  // namespace ddpx
