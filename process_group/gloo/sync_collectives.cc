#include "process_group/gloo/sync_collectives.h"

#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gloo/allgather_ring.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"

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

void broadcast_classic(const std::shared_ptr<gloo::Context>& context, void* data, size_t nbytes,
                       int root) {
  gloo::BroadcastOneToAll<uint8_t>(context, {static_cast<uint8_t*>(data)}, nbytes, root).run();
}

void allgather_classic(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                       size_t nbytes_per_rank) {
  gloo::AllgatherRing<uint8_t>(context, {static_cast<const uint8_t*>(in)},
                               static_cast<uint8_t*>(out), static_cast<int>(nbytes_per_rank))
      .run();
}

bool rooted_op_runs_on_sync_pairs(size_t nbytes_per_rank, const SyncPairLimits& limits) {
  return limits.send_capacity > 0 && nbytes_per_rank <= limits.max_bytes;
}

void gather_classic(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                    size_t nbytes_per_rank, int root) {
  const int slot = context->nextSlot();
  if (context->rank != root) {
    auto send =
        context->getPair(root)->createSendBuffer(slot, const_cast<void*>(in), nbytes_per_rank);
    send->send();
    send->waitSend();
    return;
  }
  uint8_t* dst = static_cast<uint8_t*>(out);
  std::vector<std::unique_ptr<gloo::transport::Buffer>> receives;
  for (int peer = 0; peer < context->size; ++peer) {
    if (peer == root) continue;
    receives.push_back(context->getPair(peer)->createRecvBuffer(slot, dst + peer * nbytes_per_rank,
                                                                nbytes_per_rank));
  }
  if (dst + root * nbytes_per_rank != in) {
    std::memmove(dst + root * nbytes_per_rank, in, nbytes_per_rank);
  }
  for (auto& receive : receives) receive->waitRecv();
}

void scatter_classic(const std::shared_ptr<gloo::Context>& context,
                     const std::vector<const void*>& inputs, void* out, size_t nbytes_per_rank,
                     int root) {
  const int slot = context->nextSlot();
  if (context->rank != root) {
    auto receive = context->getPair(root)->createRecvBuffer(slot, out, nbytes_per_rank);
    receive->waitRecv();
    return;
  }
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends;
  for (int peer = 0; peer < context->size; ++peer) {
    if (peer == root) continue;
    sends.push_back(context->getPair(peer)->createSendBuffer(slot, const_cast<void*>(inputs[peer]),
                                                             nbytes_per_rank));
    sends.back()->send();
  }
  if (out != inputs[root]) std::memmove(out, inputs[root], nbytes_per_rank);
  for (auto& send : sends) send->waitSend();
}

void barrier_classic(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierAllToOne(context).run();
}

}  // namespace ddpx
