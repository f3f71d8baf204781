// Collectives over one shared-memory channel (channel.h). Messages of any
// size stream through the fixed staging slots chunk by chunk; consecutive
// chunks use different slots, so a rank copies its next chunk in while its
// peers still reduce or copy out the previous one.
//
// Reductions have a fixed order per element, the same on every rank, so
// every rank gets the same bits:
//  - allreduce up to small_max_bytes: every rank copies its input into its
//    slot, then reduces all ranks' copies in rank order 0, 1, ..., n-1.
//  - larger allreduce and reduce: the chunk is split in n parts; rank j
//    reduces part j starting from its own data, then ranks j+1, ..., j-1
//    (mod n), into its slot, and every rank copies every part out.
//  - reduce_scatter: rank j reduces its part in rank order 0..n-1.
// Every op posts the same number of steps on every rank (channel.h).
#ifndef DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_
#define DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "process_group/shm/channel.h"

namespace ddpx {
namespace shm {

// out[i] = a[i] op b[i]; out may be a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

struct Reduction {
  ReduceFn fn;
  size_t element_bytes;
  // Identifies the dtype and reduce op across processes (fn's address does
  // not), for the ranks' comparison of their ops; 0: unknown.
  uint8_t code = 0;
};

// Allreduces take the one-pass path up to this size (measured: below it one
// step less beats the split reduction's parallel work).
inline constexpr size_t kDefaultSmallMaxBytes = 32 << 10;

// Allreduces and reduces of at least this many bytes write their output
// with streaming stores: each rank's output alone is then half the last-level
// cache of a typical server core complex, and would not stay in it anyway.
inline constexpr size_t kStreamingCopyFromBytes = 16 << 20;

absl::Status allreduce(Channel& ch, void* data, size_t count, Reduction r,
                       const Deadline& deadline, size_t small_max_bytes = kDefaultSmallMaxBytes);
// Only `root`'s data changes.
absl::Status reduce(Channel& ch, void* data, size_t count, Reduction r, int root,
                    const Deadline& deadline);
absl::Status broadcast(Channel& ch, void* data, size_t nbytes, int root,
                       const Deadline& deadline);
// `out` gets rank r's `nbytes` at r * nbytes.
absl::Status allgather(Channel& ch, const void* in, void* out, size_t nbytes,
                       const Deadline& deadline);
// `in` holds size() blocks of `count` elements; `out` gets the reduction of
// every rank's block rank().
absl::Status reduce_scatter(Channel& ch, const void* in, void* out, size_t count, Reduction r,
                            const Deadline& deadline);
absl::Status barrier(Channel& ch, const Deadline& deadline);

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_COLLECTIVES_H_
