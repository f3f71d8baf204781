#include "process_group/gloo/sync_collectives.h"

#include <climits>
#include <cstdint>
#include <vector>

#include "gloo/allgather_ring.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"

namespace ddpx {

bool broadcast_runs_on_sync_pairs(size_t nbytes, const SyncPairLimits& limits) {
  return limits.send_capacity > 0 && nbytes <= limits.max_bytes;
}

bool allgather_runs_on_sync_pairs(size_t nbytes_per_rank, int world_size,
                                  const SyncPairLimits& limits) {
  return limits.send_capacity > 0 && nbytes_per_rank <= limits.max_bytes &&
         nbytes_per_rank <= limits.send_capacity / 2 &&
         nbytes_per_rank * static_cast<size_t>(world_size) <= static_cast<size_t>(INT_MAX);
}

void broadcast_classic(const std::shared_ptr<gloo::Context>& context, void* data,
                       size_t nbytes, int root) {
  gloo::BroadcastOneToAll<uint8_t>(context, {static_cast<uint8_t*>(data)}, nbytes, root).run();
}

void allgather_classic(const std::shared_ptr<gloo::Context>& context, const void* in,
                       void* out, size_t nbytes_per_rank) {
  gloo::AllgatherRing<uint8_t>(context, {static_cast<const uint8_t*>(in)},
                               static_cast<uint8_t*>(out), static_cast<int>(nbytes_per_rank))
      .run();
}

void barrier_classic(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierAllToOne(context).run();
}

}  // namespace ddpx
