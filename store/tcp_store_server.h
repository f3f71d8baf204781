// The TCPStore server: one epoll event loop thread serving every client over
// non-blocking sockets (no thread per connection). Clients waiting on keys
// are pushed their wake-up the moment the last key appears; nobody polls.
//
// Speaks PyTorch's TCPStore protocol (store/PROTOCOL.md), so torch clients
// work against it. A client that breaks the protocol (malformed frame,
// unknown query, a length past the limit) is dropped with a logged reason; a
// request past a limit (the output budget, the memory limit) gets an error
// reply and its connection is closed; running out of memory while serving
// one client drops that client. Everyone else keeps being served, and no
// stored value is lost. docs/store.md, "Limits", lists each limit.
#ifndef DDPX_STORE_TCP_STORE_SERVER_H_
#define DDPX_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "store/protocol.h"

namespace ddpx {

struct TCPStoreServerOptions {
  static constexpr uint64_t kDefaultMaxMemory = 1ull << 30;
  static constexpr std::chrono::milliseconds kDefaultValidateTimeout{10000};
  static constexpr uint32_t kDefaultMaxConnectionsPerAddress = 8192;

  // Address to listen on; empty means every interface (IPv6 and IPv4).
  std::string host;
  // 0 picks a free port; port() tells which.
  uint16_t port = 0;
  // Longest accepted request frame (and any length prefix inside it).
  uint64_t max_frame_length = protocol::kDefaultMaxLength;
  // Output budget: what one connection may owe its client, in reply bytes
  // not yet taken by the kernel. A queued value counts its full size though
  // it is a reference, not a copy. A request whose reply would pass it gets
  // an error reply (and the connection is closed); a client owing more is
  // dropped. The default lets one GET read the largest value one SET can
  // write.
  uint64_t max_pending_output = 2 * protocol::kDefaultMaxLength;
  // Memory limit of the whole server, in bytes it holds for clients (values,
  // stored or still being sent, partial requests, queued replies, wait
  // registrations); 0: none. Past it, writes (SET, APPEND, MULTI_SET,
  // COMPARE_SET and ADD that add bytes, WAIT registrations, large partial
  // requests) are refused with an error reply; stored values are kept and
  // reads, deletes and PINGs are served. The default bounds what clients can
  // make a server (a training job's rank 0, for one) hold, with room for
  // rendezvous of thousands of ranks: Gloo's full mesh stores about
  // 150 bytes per pair of ranks, 160 MB at 1024 ranks. Larger jobs raise it.
  uint64_t max_memory = kDefaultMaxMemory;
  // A connection that has not sent VALIDATE this long after it was accepted
  // is closed (torch's clients and ours send it first, at once); 0: never.
  std::chrono::milliseconds validate_timeout = kDefaultValidateTimeout;
  // Connections one peer address may hold open at a time; past it a new
  // one is closed as soon as it is accepted (the others are untouched).
  // Every rank of a job on one host connects from the same address
  // (127.0.0.1 for a local job), so the default leaves room for thousands
  // of them. It is lowered to half the process's open-file limit
  // (RLIMIT_NOFILE) when that is smaller, so that one address cannot take
  // every descriptor. 0: no limit.
  uint32_t max_connections_per_address = kDefaultMaxConnectionsPerAddress;
  // Log dropped clients to stderr.
  bool log_drops = true;
};

class TCPStoreServer {
 public:
  struct Stats {
    uint64_t accepted = 0;
    uint64_t active = 0;
    // Dropped for a protocol violation, a mid-request hang-up, a refused
    // request (after its error reply) or running out of memory.
    uint64_t dropped = 0;
    std::string last_drop_reason;
    uint64_t memory_used = 0;  // what max_memory limits
    uint64_t memory_limit = 0;  // max_memory (0: none)
    uint64_t out_of_memory = 0;  // clients dropped on an allocation failure
    // Connections closed at once for their address's limit (not counted in
    // accepted, active or dropped).
    uint64_t refused = 0;
    uint32_t max_connections_per_address = 0;  // in force (0: none)
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
