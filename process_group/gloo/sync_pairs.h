// Gloo contexts whose TCP pairs are read by the thread running the op.
//
// Gloo's TCP pairs are asynchronous by default: the device's event-loop
// thread reads every message and then wakes the thread waiting for it. A
// small op is a chain of such messages (halving-doubling on 4 ranks: 4 or
// more hops), so each hop costs two wake-ups on the receiving side, the
// loop thread's and the waiter's. On a machine with fewer cores than busy
// threads (4 ranks on 2 vCPUs here) every wake-up waits for a CPU and small
// ops are scheduler-bound. Gloo's own "sync" mode (tcp::Pair::setSync)
// takes a pair off the event loop and makes the op's thread read its
// messages itself with a blocking recv() bounded by its socket's SO_RCVTIMEO
// (set to each op's timeout, set_sync_pair_timeout): one wake-up per hop.
//
// Sync mode has two limits, both of which GlooBackend respects:
//  - only pair-bound buffers work in it (the classic algorithm classes:
//    AllreduceRing, AllreduceHalvingDoubling, ...); an unbound-buffer op
//    (gloo::allreduce, broadcast, ...) would never be read. A sync context
//    therefore runs classic algorithms only.
//  - writes block until the kernel took the whole message. Two ranks writing
//    to each other at once (a ring step) only both finish if what each has
//    written and the other has not read yet fits in what the kernel buffers
//    for a peer that is not reading: the sender's send buffer plus the
//    peer's receive window. A sync pair asks for a kSyncPairSendBufferBytes
//    SO_SNDBUF when it switches; Linux grants at most net.core.wmem_max
//    (208 KiB by default, 4 MiB on the development VM) and reports twice
//    that, half being its bookkeeping. The ranks agree at rendezvous on the
//    smallest grant anywhere (agree_on_sync_limits), and an op goes to
//    the sync pairs only if its worst case of unread bytes on one pair
//    (sync_pair_unread_bytes) fits in half of it: the local send buffer
//    alone holds it, whatever the peer's receive window is. (Other contexts
//    leave SO_SNDBUF to the kernel's autotuning, send_buffer_autotuning.h,
//    a fix for large unbound ops, which never run here; Gloo itself only
//    ever grows the size, so it keeps this one.)
//
// A larger halving-doubling allreduce runs on the sync pairs in pieces
// (run_allreduce_in_pieces) when the grant allows pieces of at least
// kSyncPiecesMinBytes: one blocking read per message still beats the event
// loop's two wake-ups at every size measured (docs/gloo.md, "Allreduce
// algorithm choice").
#ifndef DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_
#define DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "process_group/gloo/allreduce_algorithms.h"

namespace gloo {
class Context;
}

namespace ddpx {

// The SO_SNDBUF a sync pair asks for.
inline constexpr size_t kSyncPairSendBufferBytes = size_t{8} << 20;
// The largest allreduce (bytes per tensor) a sync context may carry in one
// piece, and GlooOptions::sync_max_bytes's default and upper bound: a
// quarter of the request, so that twice the message (halving-doubling's
// worst case of unread bytes) fits in the grant's usable half.
inline constexpr size_t kSyncPairMaxMessageBytes = kSyncPairSendBufferBytes / 4;
// Pieces smaller than this cost more in per-piece rounds than they save:
// below it (a kernel that grants little), large allreduces stay on the
// event-loop pairs.
inline constexpr size_t kSyncPiecesMinBytes = size_t{1} << 20;

// What the sync pairs may carry, agreed by every rank at rendezvous.
struct SyncPairLimits {
  size_t max_bytes = 0;      // the smallest GlooOptions::sync_max_bytes of any rank
  size_t send_capacity = 0;  // the smallest SO_SNDBUF (as reported) on any rank
};

// The most bytes an allreduce of `nbytes` per tensor with the classic
// `algorithm` may have written to one peer that the peer has not read yet:
// halving-doubling exchanges with each partner once per phase (2 x nbytes
// bounds it, also for its non-power-of-two blocks); the ring-like ones may
// run up to world_size - 1 steps ahead of a neighbour with the whole
// message each.
size_t sync_pair_unread_bytes(AllreduceAlgorithm algorithm, size_t nbytes, int world_size);

// Whether an allreduce of `nbytes` per tensor with `algorithm` goes to the
// worker's sync context in one piece: classic algorithms (bound buffers)
// only, at most `limits.max_bytes`, and only if its unread bytes fit in half
// the agreed send capacity.
bool allreduce_runs_on_sync_pairs(AllreduceAlgorithm algorithm, size_t nbytes,
                                  int world_size, const SyncPairLimits& limits);

// The piece size (bytes per tensor) for halving-doubling allreduces too
// large for one piece, or 0 when the limits allow no piece of at least
// kSyncPiecesMinBytes.
size_t sync_piece_bytes(int world_size, const SyncPairLimits& limits);

// Runs `call` as consecutive allreduces of at most `piece_bytes` per tensor
// (rounded down to whole elements, at least one). Each piece is a complete
// classic allreduce with its own slots, so every rank must use the same
// piece size.
void run_allreduce_in_pieces(AllreduceAlgorithm algorithm, const AllreduceCall& call,
                             size_t piece_bytes);

// Switches every TCP pair of `context` to sync mode (no busy polling) and
// asks for a kSyncPairSendBufferBytes send buffer. Call
// once after connectFullMesh, before any op; pairs of another transport are
// left alone. Throws gloo's exceptions (a pair that closed meanwhile).
void read_pairs_on_calling_thread(gloo::Context& context);

// Bounds every blocking read and write on `context`'s sync pairs by
// `timeout` (their sockets' SO_RCVTIMEO and SO_SNDTIMEO, which Gloo set to
// the context's timeout when they connected): the classic classes on a sync
// pair wait no longer than that, and then fail with Gloo's "Read timeout" or
// "Write timeout". Call it from the thread that runs the context's ops,
// before an op. Throws gloo's exceptions.
void set_sync_pair_timeout(gloo::Context& context, std::chrono::milliseconds timeout);

// The kernel's SO_SNDBUF of the pair to `peer` (0 for self).
size_t sync_pair_send_buffer_bytes(gloo::Context& context, int peer);

// The limits every rank uses: the smallest `max_bytes` (each rank's
// GlooOptions::sync_max_bytes; ranks given different ones must still route
// every op alike) and the smallest SO_SNDBUF of any pair of `contexts`, on
// any rank. A MIN allreduce over the ranks on contexts[0], so call it at the
// same point on every rank (rendezvous). Zeros on one rank. Throws gloo's
// exceptions.
SyncPairLimits agree_on_sync_limits(const std::vector<std::shared_ptr<gloo::Context>>& contexts,
                                    size_t max_bytes);

// Whether the pair to `peer` is in sync mode (false for self). For tests.
bool pair_reads_on_calling_thread(gloo::Context& context, int peer);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_
