// Keeps the kernel's send-buffer autotuning on for every TCP pair of a Gloo
// context, whichever of Gloo's algorithm families runs on it.
//
// Why: Gloo's bound-buffer send path (tcp::Pair::send(Op&), used by the
// classic algorithm classes: AllreduceRing, AllreduceHalvingDoubling, ...)
// calls setsockopt(SO_SNDBUF, message bytes) the first time a pair sends a
// message larger than the size it last set, starting from 0. The first
// classic op of a small message (the trainer's 2-double evaluation
// allreduce) therefore pins the socket's send buffer to the kernel minimum
// (~4.6 KiB): setting SO_SNDBUF also switches off the kernel's autotuning
// for good. The unbound-buffer path (gloo::allreduce, our rings, broadcast,
// ...) never sizes the buffer and relies on that autotuning, so every later
// large unbound op on that pair crawled through a 4.6 KiB window, ~1.3 MB/s
// on this VM: the 1.1-1.6 s steps after an evaluation (docs/gloo.md).
//
// The fix tells each pair that its send buffer is already as large as Gloo
// would ever ask (Gloo only grows it), so Gloo never calls setsockopt and
// the socket keeps the autotuned buffer that the unbound path already uses.
#ifndef DDPX_PROCESS_GROUP_GLOO_SEND_BUFFER_AUTOTUNING_H_
#define DDPX_PROCESS_GROUP_GLOO_SEND_BUFFER_AUTOTUNING_H_

#include <cstddef>

namespace gloo {
class Context;
}

namespace ddpx {

// Call once after connectFullMesh, before any op runs on `context`. Pairs of
// a transport other than Gloo's TCP one are left alone.
void keep_send_buffer_autotuning(gloo::Context& context);

// The SO_SNDBUF value Gloo has recorded for the pair to `peer` (0 when it
// never set one; our marker after keep_send_buffer_autotuning). For tests.
size_t gloo_recorded_send_buffer_bytes(gloo::Context& context, int peer);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SEND_BUFFER_AUTOTUNING_H_
