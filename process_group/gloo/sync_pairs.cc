#include "process_group/gloo/sync_pairs.h"

#include <algorithm>

#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {

bool allreduce_runs_on_sync_pairs(AllreduceAlgorithm algorithm, size_t nbytes,
                                  size_t sync_max_bytes) {
  return is_classic_allreduce(algorithm) &&
         nbytes <= std::min(sync_max_bytes, kSyncPairMaxMessageBytes);
}

void read_pairs_on_calling_thread(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    // Busy polling would keep a core spinning per waiting op: on a machine
    // with fewer cores than ranks it takes the CPU the peers need.
    if (pair != nullptr) pair->setSync(/*sync=*/true, /*busyPoll=*/false);
  }
}

bool pair_reads_on_calling_thread(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  return pair != nullptr && TcpPairInternals::is_sync(*pair);
}

}  // namespace ddpx
