// Small POSIX socket helpers shared by the TCPStore server, client and tests.
#ifndef DDPX_STORE_SOCKET_UTIL_H_
#define DDPX_STORE_SOCKET_UTIL_H_

#include <netdb.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {

// "what: strerror(errno)" as an absl::Status of a code that fits errno.
absl::Status errno_status(const std::string& what, int err);

absl::Status set_nonblocking(int fd, bool nonblocking);
// Disables Nagle: store requests are small and latency-bound.
absl::Status set_nodelay(int fd);

// "127.0.0.1:4242" / "[::1]:4242" for the remote end, "?" if unknown.
std::string peer_name(int fd);
// A non-blocking listening socket for `host` ("" = every interface, IPv6
// dual stack first, then IPv4) and `port`.
absl::StatusOr<int> listen_on(const std::string& host, uint16_t port, int backlog);
// Where a server whose clients connect to `host` should listen: `host`
// itself when it is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.y.z),
// 127.0.0.1 (or ::1 where it has no IPv4 loopback) for "localhost"; else
// "" (every interface). Other names are not resolved for this: a machine
// may map its own name to loopback (Debian's 127.0.1.1) while the other
// machines of a job resolve it to a routable address.
std::string loopback_listen_host(const std::string& host);
// The local port a socket is bound to.
absl::StatusOr<uint16_t> local_port(int fd);

struct AddrInfoFree {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

// getaddrinfo for a TCP `node`:`port`, any address family, with `flags`
// added to AI_NUMERICSERV. The error's message is gai_strerror's text alone,
// for the caller to put in context.
absl::StatusOr<AddrInfoList> resolve_tcp(const char* node, uint16_t port, int flags);

// Tries the addresses in order: a non-blocking, close-on-exec socket for
// each, handed to `use` (connect, or bind and listen); returns the first
// socket `use` accepts. A refused socket is closed and the next address
// tried; with none left, the last error (of socket() or of `use`).
absl::StatusOr<int> first_usable_socket(
    const addrinfo* addresses, absl::FunctionRef<absl::Status(int fd, const addrinfo&)> use);

}  // namespace ddpx

#endif  // DDPX_STORE_SOCKET_UTIL_H_
