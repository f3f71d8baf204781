// How a GlooBackend binds its TCP device and how many worker threads it runs.
#ifndef DDPX_PROCESS_GROUP_GLOO_GLOO_OPTIONS_H_
#define DDPX_PROCESS_GROUP_GLOO_GLOO_OPTIONS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "process_group/gloo/allreduce_algorithms.h"
#include "process_group/gloo/sync_pairs.h"

namespace ddpx {

struct GlooOptions {
  // The network interface to bind; wins over hostname when both are set.
  // A name the host does not have is an error listing those it has.
  std::string interface;
  // The host name or address to bind and advertise to peers.
  std::string hostname;
  // Worker threads; each owns its own Gloo context, so up to this many
  // collectives run at once.
  int num_workers = 2;
  // Forces one allreduce algorithm for every size (benchmarks, tests);
  // unset: chosen per message size from the measured table.
  std::optional<AllreduceAlgorithm> allreduce_algorithm;
  // Allreduces of at most this many bytes per tensor that run a classic
  // algorithm go through a second context per worker whose pairs are read
  // by the op's own thread (sync_pairs.h: one wake-up per message instead of
  // two), if the socket buffers every rank's kernel grants make that safe;
  // larger halving-doubling ones run there in pieces of this size. So do
  // broadcasts, gathers and scatters of at most this many bytes per rank,
  // allgathers whose chunks fit, and barriers (sync_collectives.h). At most
  // kSyncPairMaxMessageBytes; 0 turns it off (and saves the extra contexts'
  // sockets).
  size_t sync_max_bytes = kSyncPairMaxMessageBytes;
  // A group whose ranks all share a host (host_identity.h) runs allreduce,
  // allreduce_coalesced, broadcast, reduce, allgather, allgather_into_tensor,
  // reduce_scatter, reduce_scatter_tensor and barrier through shared memory
  // (process_group/shm/, docs/process_group.md); the other ops, and every op
  // of a group that spans hosts or could not set up its segments, use TCP.
  bool shared_memory = true;
  // Each worker's staging area there: shm_slots slots of shm_slot_bytes.
  int shm_slots = 4;
  size_t shm_slot_bytes = 256 << 10;
  // A group that spans several hosts with the same number (> 1) of ranks on
  // each allreduces messages of at least two_level_min_bytes in two levels
  // (two_level_allreduce.h); DDPX_GLOO_TWO_LEVEL=0 turns it off.
  bool two_level_allreduce = true;
  size_t two_level_min_bytes = 256 << 10;
  // Which host this rank is on; empty: host_identity() (host name, boot id,
  // IPC namespace). Ranks with equal strings count as one host: tests give
  // ranks in one process different hosts this way.
  std::string host_identity;

  // Defaults overridden by DDPX_GLOO_SOCKET_IFNAME (else the first name in
  // PyTorch's GLOO_SOCKET_IFNAME), DDPX_GLOO_HOSTNAME,
  // DDPX_GLOO_NUM_WORKERS, DDPX_GLOO_ALLREDUCE_ALGORITHM,
  // DDPX_GLOO_SYNC_MAX_BYTES, DDPX_SHM (0 turns shared memory off, 1 on)
  // and DDPX_GLOO_TWO_LEVEL (0 or 1).
  // A malformed value is an error naming the variable.
  static absl::StatusOr<GlooOptions> from_env();
};

// The host to bind when neither interface nor hostname is given: this
// machine's host name when it resolves to an address we can bind (so other
// machines can reach us), else 127.0.0.1 (a local job).
std::string default_gloo_hostname();

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_GLOO_OPTIONS_H_
