#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {

TcpPair* tcp_pair(gloo::Context& context, int peer) {
  if (peer == context.rank) return nullptr;
  auto& pair = context.getPair(peer);
  return pair == nullptr ? nullptr : dynamic_cast<TcpPair*>(pair.get());
}

}  // namespace ddpx
