// Broadcast, allgather, barrier, gather and scatter on a worker's sync pairs
// (sync_pairs.h), with Gloo's classic classes where it has them
// (BroadcastOneToAll, AllgatherRing, BarrierAllToOne) and pair-bound
// buffers directly for gather and scatter: the unbound-buffer
// gloo::broadcast, gloo::allgather, ... can only run on event-loop pairs,
// where every hop costs the receiver two wake-ups. Measured on the
// development VM (docs/gloo.md, "Sync pairs"): 4-rank barrier 63 us against 975, 2-rank 8 B broadcast
// 17 us against 60-90, 4-rank small allgathers 4-5x faster.
//
// Blocking writes stay safe: in BroadcastOneToAll every receiver first
// sends the root a clear-to-send and then only reads, so the root's write
// to it always finishes, and in gather (scatter) only the root reads
// (writes); AllgatherRing exchanges notifications every round,
// so a rank is at most one chunk ahead of its right neighbour, and a chunk
// goes to the sync pairs only if it fits in half the agreed send capacity
// (like allreduce's unread bytes). As for allreduce, the sync pairs'
// sockets get each op's timeout (set_sync_pair_timeout), and the choice
// depends only on sizes and the agreed limits, so it is the same on every
// rank.
#ifndef DDPX_PROCESS_GROUP_GLOO_SYNC_COLLECTIVES_H_
#define DDPX_PROCESS_GROUP_GLOO_SYNC_COLLECTIVES_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "process_group/gloo/sync_pairs.h"

namespace gloo {
class Context;
}

namespace ddpx {

// A broadcast of `nbytes` goes to the sync pairs: up to limits.max_bytes.
bool broadcast_runs_on_sync_pairs(size_t nbytes, const SyncPairLimits& limits);

// An allgather of `nbytes_per_rank` from each of `world_size` ranks goes to
// the sync pairs: a chunk up to limits.max_bytes and half the send
// capacity, the whole output within the classic class's int byte counts.
bool allgather_runs_on_sync_pairs(size_t nbytes_per_rank, int world_size,
                                  const SyncPairLimits& limits);

// A gather or scatter of `nbytes_per_rank` goes to the sync pairs: up to
// limits.max_bytes.
bool rooted_op_runs_on_sync_pairs(size_t nbytes_per_rank, const SyncPairLimits& limits);

// The classic runs on `context` (a sync context; an event-loop one works
// too, for tests). They throw gloo's exceptions.
void broadcast_classic(const std::shared_ptr<gloo::Context>& context, void* data, size_t nbytes,
                       int root);
// `out` holds world_size chunks of `nbytes_per_rank`, rank r's at r.
void allgather_classic(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                       size_t nbytes_per_rank);
void barrier_classic(const std::shared_ptr<gloo::Context>& context);
// Gather and scatter on pair-bound buffers (Gloo has no classic classes for
// them): every rank sends its `nbytes_per_rank` to `root`, which receives
// them into `out` (rank r's at r; only read on the root); or `root` sends
// inputs[r] (only read on the root) to rank r's `out`.
void gather_classic(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                    size_t nbytes_per_rank, int root);
void scatter_classic(const std::shared_ptr<gloo::Context>& context,
                     const std::vector<const void*>& inputs, void* out, size_t nbytes_per_rank,
                     int root);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SYNC_COLLECTIVES_H_
