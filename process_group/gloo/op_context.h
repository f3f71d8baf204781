// What a queued op of the Gloo backend sees when it runs on its worker: the
// worker's own connections, store handle, scratch buffer and shared-memory
// channel, and the op's sequence number, tags and timeout. The paths
// (execution_plan.h) run on it; GlooBackend::enqueue fills it in.
#ifndef DDPX_PROCESS_GROUP_GLOO_OP_CONTEXT_H_
#define DDPX_PROCESS_GROUP_GLOO_OP_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/options.h"
#include "core/tensor.h"
#include "process_group/gloo/allreduce_algorithms.h"
#include "process_group/gloo/reduce_scatter_ring.h"
#include "process_group/shm/collectives.h"
#include "store/store.h"

namespace gloo {
class Context;
}

namespace ddpx {

class TwoLevelAllreduce;

struct OpContext {
  // Gloo tags an op owns: tag .. tag + kTagsPerOp - 1 (an op over a list of
  // tensors gives each its own).
  static constexpr uint32_t kTagsPerOp = 16;

  std::shared_ptr<gloo::Context> context;  // the worker's own (event-loop pairs)
  // The worker's sync-mode context (sync_pairs.h), where the classic
  // algorithm classes run; null when GlooOptions::sync_max_bytes is 0.
  // Take it through sync_pairs(), which gives its sockets the op's timeout.
  std::shared_ptr<gloo::Context> sync_context;
  // The timeout the sync context's sockets have now (the worker's own).
  std::chrono::milliseconds* sync_timeout;
  Store* store;  // the worker's own store handle
  uint64_t seq;  // same on every rank
  uint32_t tag;  // first of kTagsPerOp gloo tags owned by this op
  std::chrono::milliseconds timeout;              // the op's, resolved
  std::chrono::steady_clock::time_point started;  // when the op began to run
  Tensor* scratch;  // the worker's reusable buffer (see scratch_for)
  // The worker's shared-memory channel; null when the group is not on the
  // shared-memory path.
  shm::Channel* shm;
  // The worker's two-level allreduce; null when the group does not use it.
  TwoLevelAllreduce* two_level;

  // The op's deadline on the shared-memory path: its timeout from when it
  // began to run (without reading the clock again).
  shm::Deadline shm_deadline() const { return shm::Deadline::until(started + timeout, timeout); }

  // The worker's sync context (null if it has none), its sockets' send and
  // receive timeouts set to the op's: the classic classes wait on a sync
  // pair as long as its socket allows, so they run there only.
  std::shared_ptr<gloo::Context> sync_pairs() const;

  // The op's allreduce of `data` (`count` elements) and reduce-scatter of
  // `in` into `out` (`count` elements per rank) on `on` (the event-loop
  // context or sync_pairs()), with the op's tag and timeout; the
  // reduce-scatter's `tag` is one of the op's (an op over a list gives each
  // tensor its own).
  AllreduceCall allreduce_call(std::shared_ptr<gloo::Context> on, void* data, size_t count,
                               DType dtype, ReduceOp op) const;
  ReduceScatterCall reduce_scatter_call(std::shared_ptr<gloo::Context> on, const void* in,
                                        void* out, size_t count, DType dtype, ReduceOp op,
                                        uint32_t tag) const;

  // A 1-D tensor of `numel` elements over the worker's reusable buffer,
  // grown when too small: staging copies then fault in fresh pages once per
  // worker instead of once per op.
  Tensor scratch_for(int64_t numel, DType dtype) const;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_OP_CONTEXT_H_
