#include "store/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status errno_status(const std::string& what, int err) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENETUNREACH:
    case EHOSTUNREACH:
      return absl::UnavailableError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::ResourceExhaustedError(msg);
    case EADDRINUSE:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status set_nonblocking(int fd, bool nonblocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return errno_status("fcntl(F_GETFL)", errno);
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) < 0) return errno_status("fcntl(F_SETFL)", errno);
  return absl::OkStatus();
}

absl::Status set_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    return errno_status("setsockopt(TCP_NODELAY)", errno);
  }
  return absl::OkStatus();
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) return "?";
  char host[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return absl::StrCat(host, ":", ntohs(a->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(a->sin6_port));
  }
  return "?";
}

namespace {

bool is_loopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return false;
}

}  // namespace

std::string loopback_listen_host(const std::string& host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) {
    absl::StatusOr<AddrInfoList> addresses = resolve_tcp(host.c_str(), 0, 0);
    if (!addresses.ok()) return "";
    bool v4 = false, v6 = false;
    for (const addrinfo* ai = addresses->get(); ai != nullptr; ai = ai->ai_next) {
      if (!is_loopback(ai->ai_addr)) return "";  // a localhost that is not local
      (ai->ai_family == AF_INET ? v4 : v6) = true;
    }
    // Clients try each address localhost resolves to; one of them listens.
    return v4 ? "127.0.0.1" : v6 ? "::1" : "";
  }
  absl::StatusOr<AddrInfoList> numeric = resolve_tcp(host.c_str(), 0, AI_NUMERICHOST);
  if (!numeric.ok() || numeric->get() == nullptr) return "";
  return is_loopback(numeric->get()->ai_addr) ? host : "";
}

absl::StatusOr<uint16_t> local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) {
    return errno_status("getsockname", errno);
  }
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

absl::StatusOr<AddrInfoList> resolve_tcp(const char* node, uint16_t port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(node, absl::StrCat(port).c_str(), &hints, &res);
  if (rc != 0) return absl::UnavailableError(gai_strerror(rc));
  return AddrInfoList(res);
}

absl::StatusOr<int> first_usable_socket(
    const addrinfo* addresses, absl::FunctionRef<absl::Status(int fd, const addrinfo&)> use) {
  absl::Status last = absl::UnavailableError("no address");
  for (const addrinfo* ai = addresses; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
      last = errno_status("socket", errno);
      continue;
    }
    last = use(fd, *ai);
    if (last.ok()) return fd;
    close(fd);
  }
  return last;
}

// Binds a listening socket for `host` ("" = every interface) and `port`.
absl::StatusOr<int> listen_on(const std::string& host, uint16_t port, int backlog) {
  // With no host, try the IPv6 wildcard first (dual stack), then IPv4.
  const char* node = host.empty() ? "::" : host.c_str();
  absl::StatusOr<AddrInfoList> addresses = resolve_tcp(node, port, AI_PASSIVE);
  if (!addresses.ok() && host.empty()) {
    node = "0.0.0.0";
    addresses = resolve_tcp(node, port, AI_PASSIVE);
  }
  if (!addresses.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("store server: cannot resolve host '", host,
                                                   "': ", addresses.status().message()));
  }
  return first_usable_socket(addresses->get(), [&](int fd, const addrinfo& ai) {
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai.ai_family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, ai.ai_addr, ai.ai_addrlen) == 0 && listen(fd, backlog) == 0) {
      return absl::OkStatus();
    }
    const int err = errno;
    return errno_status(absl::StrCat("store server: bind/listen on ", node, ":", port), err);
  });
}

}  // namespace ddpx
