#include "process_group/gloo/sync_pairs.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "gloo/common/error.h"
#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {

bool allreduce_runs_on_sync_pairs(AllreduceAlgorithm algorithm, size_t nbytes,
                                  size_t sync_max_bytes) {
  return is_classic_allreduce(algorithm) &&
         nbytes <= std::min(sync_max_bytes, kSyncPairMaxMessageBytes);
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
