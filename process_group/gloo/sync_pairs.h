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
// messages itself with a blocking recv() bounded by the context's timeout
// (SO_RCVTIMEO): one wake-up per hop.
//
// Sync mode has two limits, both of which GlooBackend respects:
//  - only pair-bound buffers work in it (the classic algorithm classes:
//    AllreduceRing, AllreduceHalvingDoubling, ...); an unbound-buffer op
//    (gloo::allreduce, broadcast, ...) would never be read. A sync context
//    therefore runs classic algorithms only.
//  - writes block until the kernel took the whole message. Two ranks writing
//    to each other at once (a ring step) only both finish if each message
//    fits in what the kernel buffers for a peer that is not reading yet: the
//    sender's send buffer plus the peer's receive window. Messages stay at or
//    below kSyncPairMaxMessageBytes, and a sync pair's SO_SNDBUF is set to
//    kSyncPairSendBufferBytes when it switches: a write then fits in the
//    local send buffer whatever the peer's receive window is, with room for
//    the few messages an algorithm step may have in flight. (Other contexts
//    leave SO_SNDBUF to the kernel's autotuning, send_buffer_autotuning.h,
//    a fix for large unbound ops, which never run here; Gloo itself only
//    ever grows the size, so it keeps this one.)
#ifndef DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_
#define DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_

#include <cstddef>

#include "process_group/gloo/allreduce_algorithms.h"

namespace gloo {
class Context;
}

namespace ddpx {

// The largest allreduce (bytes per tensor) a sync context may carry: every
// classic algorithm's messages are at most this long.
inline constexpr size_t kSyncPairMaxMessageBytes = 128 * 1024;
// A sync pair's send buffer: four messages at the limit. Linux caps the
// request at net.core.wmem_max (208 KiB by default) and doubles what it
// grants for its bookkeeping: at least 416 KiB, three messages at the limit.
inline constexpr size_t kSyncPairSendBufferBytes = 4 * kSyncPairMaxMessageBytes;

// Whether an allreduce of `nbytes` per tensor with `algorithm` goes to the
// worker's sync context: classic algorithms (bound buffers) only, and only
// up to `sync_max_bytes` (GlooOptions; 0: never), itself capped at
// kSyncPairMaxMessageBytes.
bool allreduce_runs_on_sync_pairs(AllreduceAlgorithm algorithm, size_t nbytes,
                                  size_t sync_max_bytes);

// Switches every TCP pair of `context` to sync mode (no busy polling) with
// a kSyncPairSendBufferBytes send buffer. Call
// once after connectFullMesh, before any op; pairs of another transport are
// left alone. Throws gloo's exceptions (a pair that closed meanwhile).
void read_pairs_on_calling_thread(gloo::Context& context);

// The kernel's SO_SNDBUF of the pair to `peer` (0 for self). For tests.
size_t sync_pair_send_buffer_bytes(gloo::Context& context, int peer);

// Whether the pair to `peer` is in sync mode (false for self). For tests.
bool pair_reads_on_calling_thread(gloo::Context& context, int peer);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_H_
