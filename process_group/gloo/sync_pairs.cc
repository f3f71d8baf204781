#include "process_group/gloo/sync_pairs.h"

#include <algorithm>
#include <limits>

#include "gloo/allreduce_ring.h"
#include "gloo/common/error.h"
#include "gloo/context.h"
#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {

size_t sync_pair_unread_bytes(AllreduceAlgorithm algorithm, size_t nbytes, int world_size) {
  if (algorithm == AllreduceAlgorithm::kHalvingDoubling) return 2 * nbytes;
  return static_cast<size_t>(std::max(1, world_size - 1)) * nbytes;
}

bool allreduce_runs_on_sync_pairs(AllreduceAlgorithm algorithm, size_t nbytes,
                                  int world_size, const SyncPairLimits& limits) {
  return is_classic_allreduce(algorithm) && nbytes <= limits.max_bytes &&
         nbytes <= kSyncPairMaxMessageBytes &&
         sync_pair_unread_bytes(algorithm, nbytes, world_size) <= limits.send_capacity / 2;
}

size_t sync_piece_bytes(int world_size, const SyncPairLimits& limits) {
  size_t piece = std::min({limits.max_bytes, kSyncPairMaxMessageBytes,
                           limits.send_capacity / 2 /
                               sync_pair_unread_bytes(AllreduceAlgorithm::kHalvingDoubling, 1,
                                                      world_size)});
  return piece >= kSyncPiecesMinBytes ? piece : 0;
}

void run_allreduce_in_pieces(AllreduceAlgorithm algorithm, const AllreduceCall& call,
                             size_t piece_bytes) {
  const size_t element = dtype_size(call.dtype);
  const size_t per_piece = std::max<size_t>(1, piece_bytes / element);
  AllreduceCall piece = call;
  for (size_t offset = 0; offset < call.count; offset += per_piece) {
    piece.count = std::min(per_piece, call.count - offset);
    for (size_t i = 0; i < call.buffers.size(); ++i) {
      piece.buffers[i] = static_cast<char*>(call.buffers[i]) + offset * element;
    }
    run_allreduce(algorithm, piece);
  }
}

void read_pairs_on_calling_thread(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    if (!tcp_pair_set_sync(context, peer)) continue;
    // Gloo, which only ever grows the buffer, then never sets a smaller one.
    absl::Status sized = tcp_pair_size_send_buffer(context, peer, kSyncPairSendBufferBytes);
    if (!sized.ok()) {
      GLOO_THROW_IO_EXCEPTION("setsockopt(SO_SNDBUF) on a sync pair: ", sized.message());
    }
  }
}

void set_sync_pair_timeout(gloo::Context& context, std::chrono::milliseconds timeout) {
  for (int peer = 0; peer < context.size; ++peer) {
    absl::Status s = tcp_pair_set_io_timeout(context, peer, timeout);
    if (!s.ok()) GLOO_THROW_IO_EXCEPTION("a sync pair's timeout: ", s.message());
  }
}

SyncPairLimits agree_on_sync_limits(const std::vector<std::shared_ptr<gloo::Context>>& contexts,
                                    size_t max_bytes) {
  int64_t capacity = std::numeric_limits<int64_t>::max();
  for (const auto& context : contexts) {
    for (int peer = 0; peer < context->size; ++peer) {
      if (peer == context->rank) continue;
      capacity = std::min(capacity,
                          static_cast<int64_t>(sync_pair_send_buffer_bytes(*context, peer)));
    }
  }
  if (contexts.empty() || contexts[0]->size == 1) return {};
  int64_t values[2] = {static_cast<int64_t>(max_bytes), capacity};
  std::vector<int64_t*> buffer = {values};
  gloo::AllreduceRing<int64_t>(contexts[0], buffer, 2, gloo::ReductionFunction<int64_t>::min)
      .run();
  return {static_cast<size_t>(values[0]), static_cast<size_t>(values[1])};
}

size_t sync_pair_send_buffer_bytes(gloo::Context& context, int peer) {
  return tcp_pair_socket_send_buffer(context, peer);
}

bool pair_reads_on_calling_thread(gloo::Context& context, int peer) {
  return tcp_pair_is_sync(context, peer);
}

}  // namespace ddpx
