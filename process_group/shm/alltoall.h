// alltoall over one shared-memory channel (channel.h), even and uneven
// splits: rank i's block for rank j goes from i's input to j's output
// unchanged, so the result is the TCP path's, bit for bit.
//
// Each chunk, every rank writes into its slot one region per peer (the next
// part of its block for that peer) and reads its own region from every
// peer's slot. The first chunk also carries each rank's split sizes (what
// it sends to and expects from every rank): every rank reads them all, so
// every rank knows how many chunks the largest block needs and every rank
// finds a pair whose sizes disagree, and all return the same error.
#ifndef DDPX_PROCESS_GROUP_SHM_ALLTOALL_H_
#define DDPX_PROCESS_GROUP_SHM_ALLTOALL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "process_group/shm/channel.h"

namespace ddpx {
namespace shm {

// `in` holds this rank's block for rank r, send_bytes[r] bytes, after the
// blocks for ranks 0..r-1; `out` gets rank r's block for this rank,
// recv_bytes[r] bytes, in the same way. Both vectors have size() entries.
// `in` and `out` must not overlap.
absl::Status alltoall(Channel& ch, const void* in, const std::vector<int64_t>& send_bytes,
                      void* out, const std::vector<int64_t>& recv_bytes, const Deadline& deadline);

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_ALLTOALL_H_
