#include "process_group/gloo/tcp_pair_access.h"

#include <cctype>

namespace ddpx {

TcpPair* tcp_pair(gloo::Context& context, int peer) {
  if (peer == context.rank) return nullptr;
  auto& pair = context.getPair(peer);
  return pair == nullptr ? nullptr : dynamic_cast<TcpPair*>(pair.get());
}

namespace {

// Whether `text` holds `address` as a whole ("[10.0.0.1]:4567" is not in
// "[10.0.0.1]:45678").
bool names(const std::string& text, const std::string& address) {
  if (address.empty()) return false;
  for (size_t at = text.find(address); at != std::string::npos;
       at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || !isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

}  // namespace

PairReport report_pairs(gloo::Context& context, const std::string& cause) {
  PairReport report;
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    bool recv, send;
    std::string address;
    {
      std::lock_guard<std::mutex> lock(TcpPairInternals::mutex(*pair));
      recv = TcpPairInternals::has_pending_recv(*pair);
      send = TcpPairInternals::has_pending_send(*pair);
      address = TcpPairInternals::peer_address(*pair);
    }
    if (recv) report.no_data.push_back(peer);
    if (send) report.not_asked.push_back(peer);
    if (names(cause, address)) report.named.push_back(peer);
  }
  return report;
}

}  // namespace ddpx
