#include "process_group/gloo/send_buffer_autotuning.h"

#include <cstddef>
#include <mutex>

#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {
namespace {

// Gloo's own cap for the SO_SNDBUF it sets (kMaxSendBufferSize in
// gloo/transport/tcp/pair.cc): a message never asks for more.
constexpr size_t kGlooMaxSendBufferBytes = size_t{32} << 20;

}  // namespace

void keep_send_buffer_autotuning(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    // Under the pair's lock, where Gloo reads it (Pair::send).
    std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(*pair));
    TcpPairInternals::send_buffer_size(*pair) = kGlooMaxSendBufferBytes;
  }
}

size_t gloo_recorded_send_buffer_bytes(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return 0;
  std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(*pair));
  return TcpPairInternals::send_buffer_size(*pair);
}

}  // namespace ddpx
