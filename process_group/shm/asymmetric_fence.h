// The fence between a post (store the step counter, then read whether a
// peer sleeps on it) and a waiter going to sleep (count itself in as a
// sleeper, then read the counter): each side must see the other's store,
// or a post can miss its sleeper. A full fence on both sides does that,
// but the post's fence stalls every op until its stores are visible to the
// peers (tens of ns of a sub-microsecond op). With the kernel's membarrier
// (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED) the sleeper, which is
// about to sleep anyway, forces a full fence on every CPU running a
// registered process, and the post needs only to keep the compiler from
// reordering (as liburcu and folly's asymmetric fences do).
#ifndef DDPX_PROCESS_GROUP_SHM_ASYMMETRIC_FENCE_H_
#define DDPX_PROCESS_GROUP_SHM_ASYMMETRIC_FENCE_H_

namespace ddpx {
namespace shm {

// Registers this process for the sleepers' fence (once per process); true
// when it is, and its posts may then go without a hardware fence.
bool posts_may_skip_fence();

// The sleeper's side: a full fence on every CPU running a registered
// process. False when the kernel refused it (then a post that skipped its
// fence may be missed; the sleeper must sleep in short slices).
bool fence_every_poster();

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_ASYMMETRIC_FENCE_H_
