// Reaching a Gloo context's TCP pairs and the parts of tcp::Pair Debian's
// libgloo keeps protected, without patching the library (package-private:
// send_buffer_autotuning and sync_pairs use it).
#ifndef DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_
#define DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "gloo/context.h"
#include "gloo/transport/tcp/pair.h"

namespace ddpx {

using TcpPair = gloo::transport::tcp::Pair;

// The pair to `peer`; null for this rank itself or another transport's pair.
TcpPair* tcp_pair(gloo::Context& context, int peer);

// What the pairs of `context` say about the peers after an op on it failed:
// the peers whose pair still holds a receive this rank posted (no data came
// from them), those whose pair holds a send they never asked for (they did
// not reach the op), and those whose address `cause` names (Gloo names the
// peer in "Read timeout", "Connection closed by peer", ...). Ascending ranks.
struct PairReport {
  std::vector<int> no_data;
  std::vector<int> not_asked;
  std::vector<int> named;
};
PairReport report_pairs(gloo::Context& context, const std::string& cause);

// A pointer to a protected member formed inside a derived class may be used
// on any object of the base: the standard way in. Never instantiated.
struct TcpPairInternals : TcpPair {
  // The pair's lock, under which Gloo reads and writes the fields below.
  static std::mutex& mutex(TcpPair& pair) { return pair.*(&TcpPairInternals::m_); }
  // The SO_SNDBUF size Gloo last set (it only ever grows it).
  static size_t& send_buffer_size(TcpPair& pair) {
    return pair.*(&TcpPairInternals::sendBufferSize_);
  }
  static bool is_sync(const TcpPair& pair) { return (pair.*(&TcpPairInternals::sync_)).load(); }
  // The connected socket (-1 before connecting and after closing).
  static int fd(TcpPair& pair) { return pair.*(&TcpPairInternals::fd_); }
  // Unbound-buffer receives posted and not yet answered with data, and
  // sends waiting for the peer's receive (under mutex()).
  static bool has_pending_recv(TcpPair& pair) {
    for (const auto& entry : pair.*(&TcpPairInternals::localPendingRecv_)) {
      if (!entry.second.empty()) return true;
    }
    return false;
  }
  static bool has_pending_send(TcpPair& pair) {
    for (const auto& entry : pair.*(&TcpPairInternals::localPendingSend_)) {
      if (!entry.second.empty()) return true;
    }
    return false;
  }
  // The peer's address as Gloo's messages print it.
  static std::string peer_address(TcpPair& pair) {
    return (pair.*(&TcpPairInternals::peer_)).str();
  }
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_
