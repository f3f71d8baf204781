#include "process_group/gloo/reduce_scatter_ring.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/reduce_scatter.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "process_group/gloo/reduce_kernels.h"

namespace ddpx {
namespace {

// Gloo slot prefix of this algorithm; the op's tag keeps ops apart.
constexpr uint8_t kReduceScatterSlotPrefix = 0x50;

void wait_recv(gloo::transport::UnboundBuffer& b, std::chrono::milliseconds t) {
  if (!b.waitRecv(t)) GLOO_THROW_IO_EXCEPTION("reduce_scatter: receive aborted");
}

void wait_send(gloo::transport::UnboundBuffer& b, std::chrono::milliseconds t) {
  if (!b.waitSend(t)) GLOO_THROW_IO_EXCEPTION("reduce_scatter: send aborted");
}

}  // namespace

void run_reduce_scatter_ring(const ReduceScatterCall& call) {
  const int n = call.context->size;
  const int rank = call.context->rank;
  const size_t elem = dtype_size(call.dtype);
  const size_t chunk_bytes = call.count * elem;
  if (chunk_bytes == 0) return;
  const uint8_t* input = static_cast<const uint8_t*>(call.input);
  if (n == 1) {
    memcpy(call.output, input, chunk_bytes);
    return;
  }
  UntypedReduceFn reduce = reduce_function(call.dtype, call.op);
  if (n > 2 && call.scratch == nullptr) {
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("reduce_scatter ring needs scratch");
  }

  // Segments of whole elements.
  const size_t seg_elems = std::max<size_t>(1, call.segment_bytes / elem);
  const size_t seg_bytes = seg_elems * elem;
  const size_t num_segs = (chunk_bytes + seg_bytes - 1) / seg_bytes;
  auto seg_len = [&](size_t k) { return std::min(seg_bytes, chunk_bytes - k * seg_bytes); };

  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, call.tag);
  auto chunk_of = [&](int s) { return ((rank - s - 2) % n + 2 * n) % n; };

  // Unbound buffers register nothing with the peers; the sender only sends
  // what the receiver asked for, so posting receives early hides that round
  // trip.
  auto in_buf = call.context->createUnboundBuffer(const_cast<uint8_t*>(input),
                                                  n * chunk_bytes);
  auto out_buf = call.context->createUnboundBuffer(call.output, chunk_bytes);
  std::unique_ptr<gloo::transport::UnboundBuffer> scratch_buf;
  if (n > 2) scratch_buf = call.context->createUnboundBuffer(call.scratch, chunk_bytes);
  // The buffer step s receives into: the last step lands in the output.
  auto buffer_of = [&](int s) -> gloo::transport::UnboundBuffer& {
    return (n - 2 - s) % 2 == 0 ? *out_buf : *scratch_buf;
  };
  size_t pending_out = 0, pending_scratch = 0;
  auto pending_of = [&](gloo::transport::UnboundBuffer& b) -> size_t& {
    return &b == out_buf.get() ? pending_out : pending_scratch;
  };

  // Step 0 sends this rank's own input chunk r - 1 as it is.
  const size_t first = static_cast<size_t>((rank - 1 + n) % n) * chunk_bytes;
  for (size_t k = 0; k < num_segs; ++k) {
    in_buf->send(right, slot, first + k * seg_bytes, seg_len(k));
  }
  for (int s = 0; s <= n - 2; ++s) {
    gloo::transport::UnboundBuffer& into = buffer_of(s);
    // It was last sent from two steps ago; those sends must be out first.
    for (size_t& p = pending_of(into); p > 0; --p) wait_send(into, call.timeout);
    for (size_t k = 0; k < num_segs; ++k) {
      into.recv(left, slot, k * seg_bytes, seg_len(k));
    }
    const uint8_t* mine = input + static_cast<size_t>(chunk_of(s)) * chunk_bytes;
    uint8_t* data = static_cast<uint8_t*>(into.ptr);
    for (size_t k = 0; k < num_segs; ++k) {
      wait_recv(into, call.timeout);  // one pair, one slot: in posting order
      const size_t off = k * seg_bytes;
      reduce(data + off, data + off, mine + off, seg_len(k) / elem);
      if (s < n - 2) {
        into.send(right, slot, off, seg_len(k));
        ++pending_of(into);
      }
    }
  }
  for (size_t k = 0; k < num_segs; ++k) wait_send(*in_buf, call.timeout);
  for (; pending_out > 0; --pending_out) wait_send(*out_buf, call.timeout);
  for (; pending_scratch > 0; --pending_scratch) wait_send(*scratch_buf, call.timeout);
}

void run_reduce_scatter_halving_doubling(const ReduceScatterCall& call, void* work) {
  const int n = call.context->size;
  const size_t chunk_bytes = call.count * dtype_size(call.dtype);
  if (chunk_bytes == 0) return;
  memcpy(work, call.input, n * chunk_bytes);
  visit_dtype(call.dtype, [&](auto zero) {
    using T = decltype(zero);
    const gloo::ReductionFunction<T>* fn = classic_reduction<T>(call.op);
    const std::vector<int> per_rank(n, static_cast<int>(call.count));
    T* data = static_cast<T*>(work);
    gloo::ReduceScatterHalvingDoubling<T>(call.context, {data},
                                          static_cast<int>(call.count) * n, per_rank, fn)
        .run();
  });
  // The algorithm leaves each rank's share at the front of the buffer.
  memcpy(call.output, work, chunk_bytes);
}

}  // namespace ddpx
