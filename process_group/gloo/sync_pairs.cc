#include "process_group/gloo/sync_pairs.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>

#include "gloo/allreduce_ring.h"
#include "gloo/common/error.h"
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

namespace {

// Sets the socket's SO_SNDBUF and tells Gloo, which only ever grows it, so
// that it never sets a smaller one (under the pair's lock, where Gloo reads
// and writes its record).
void size_send_buffer(TcpPair& pair) {
  std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(pair));
  const int fd = TcpPairInternals::fd(pair);
  if (fd < 0) return;
  int bytes = static_cast<int>(kSyncPairSendBufferBytes);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0) {
    GLOO_THROW_IO_EXCEPTION("setsockopt(SO_SNDBUF) on a sync pair: ", strerror(errno));
  }
  TcpPairInternals::send_buffer_size(pair) = kSyncPairSendBufferBytes;
}

}  // namespace

void read_pairs_on_calling_thread(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    // Busy polling would keep a core spinning per waiting op: on a machine
    // with fewer cores than ranks it takes the CPU the peers need.
    pair->setSync(/*sync=*/true, /*busyPoll=*/false);
    size_send_buffer(*pair);
  }
}

void set_sync_pair_timeout(gloo::Context& context, std::chrono::milliseconds timeout) {
  struct timeval tv = {};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(*pair));
    const int fd = TcpPairInternals::fd(*pair);
    if (fd < 0) continue;  // closed: the op fails on it anyway
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
      GLOO_THROW_IO_EXCEPTION("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO) on a sync pair: ",
                              strerror(errno));
    }
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
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return 0;
  std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(*pair));
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  if (getsockopt(TcpPairInternals::fd(*pair), SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0) return 0;
  return static_cast<size_t>(bytes);
}

bool pair_reads_on_calling_thread(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  return pair != nullptr && TcpPairInternals::is_sync(*pair);
}

}  // namespace ddpx
