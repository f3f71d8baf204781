#include "process_group/gloo/send_buffer_autotuning.h"

#include <cstddef>
#include <mutex>

#include "gloo/context.h"
#include "gloo/transport/tcp/pair.h"

namespace ddpx {
namespace {

using TcpPair = gloo::transport::tcp::Pair;

// Gloo's own cap for the SO_SNDBUF it sets (kMaxSendBufferSize in
// gloo/transport/tcp/pair.cc): a message never asks for more.
constexpr size_t kGlooMaxSendBufferBytes = size_t{32} << 20;

// tcp::Pair keeps the size it last gave SO_SNDBUF (and its lock) protected.
// A pointer to a protected member formed inside a derived class may be used
// on any object of the base: the standard way to reach them without
// patching Debian's library. Never instantiated.
struct PairInternals : TcpPair {
  static std::mutex& mutex(TcpPair& pair) { return pair.*(&PairInternals::m_); }
  static size_t& send_buffer_size(TcpPair& pair) {
    return pair.*(&PairInternals::sendBufferSize_);
  }
};

TcpPair* tcp_pair(gloo::Context& context, int peer) {
  if (peer == context.rank) return nullptr;
  auto& pair = context.getPair(peer);
  return pair == nullptr ? nullptr : dynamic_cast<TcpPair*>(pair.get());
}

}  // namespace

void keep_send_buffer_autotuning(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    // Under the pair's lock, where Gloo reads it (Pair::send).
    std::lock_guard<std::mutex> lock(PairInternals::mutex(*pair));
    PairInternals::send_buffer_size(*pair) = kGlooMaxSendBufferBytes;
  }
}

size_t gloo_recorded_send_buffer_bytes(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return 0;
  std::lock_guard<std::mutex> lock(PairInternals::mutex(*pair));
  return PairInternals::send_buffer_size(*pair);
}

}  // namespace ddpx
