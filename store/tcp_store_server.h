// The TCPStore server: one epoll event loop thread serving every client over
// non-blocking sockets (no thread per connection). Clients waiting on keys
// are pushed their wake-up the moment the last key appears; nobody polls.
//
// Speaks PyTorch's TCPStore protocol (store/PROTOCOL.md), so torch clients
// work against it. A client that breaks the protocol (malformed frame,
// unknown query, a length past the limit, responses it never reads) is
// dropped with a logged reason; everyone else keeps being served.
#ifndef DDPX_STORE_TCP_STORE_SERVER_H_
#define DDPX_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "store/protocol.h"

namespace ddpx {

struct TCPStoreServerOptions {
  // Address to listen on; empty means every interface (IPv6 and IPv4).
  std::string host;
  // 0 picks a free port; port() tells which.
  uint16_t port = 0;
  // Longest accepted request frame (and any length prefix inside it).
  uint64_t max_frame_length = protocol::kDefaultMaxLength;
  // A client whose unsent responses exceed this is dropped (it is not
  // reading), so one slow reader cannot grow the server without bound.
  uint64_t max_pending_output = 64ull << 20;
  // Log dropped clients to stderr.
  bool log_drops = true;
};

class TCPStoreServer {
 public:
  struct Stats {
    uint64_t accepted = 0;
    uint64_t active = 0;
    uint64_t dropped = 0;  // for a protocol violation or a mid-request hang-up
    std::string last_drop_reason;
  };

  // Binds, listens (backlog from /proc/sys/net/core/somaxconn) and starts the
  // event loop thread.
  static absl::StatusOr<std::unique_ptr<TCPStoreServer>> start(
      const TCPStoreServerOptions& options = {});

  // Stops the loop and closes every connection.
  ~TCPStoreServer();
  void stop();

  uint16_t port() const { return port_; }
  Stats stats() const;

  class Loop;  // the event loop; tcp_store_server.cc

 private:
  TCPStoreServer() = default;

  uint16_t port_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  mutable std::mutex stop_mu_;
  Stats final_stats_;  // kept for stats() after stop()
};

// Reads /proc/sys/net/core/somaxconn (SOMAXCONN if unreadable).
int host_listen_backlog();

}  // namespace ddpx

#endif  // DDPX_STORE_TCP_STORE_SERVER_H_
