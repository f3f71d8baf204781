#include "examples/benchmarks/store_bench_floor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "examples/benchmarks/store_bench_swarm.h"
#include "store/protocol.h"

namespace ddpx {
namespace bench {
namespace {

using protocol::FrameWriter;
using protocol::QueryType;

// The reply the benchmark's client expects to the request starting with
// `first_byte` (see Swarm::closed_loop), or null for anything else.
const std::string* canned_reply(uint8_t first_byte) {
  static const std::string kPingEcho(4, '\0');
  static const std::string kTwoPingEchoes(8, '\0');  // VALIDATE+PING, SET+PING
  static const std::string kInt64(8, '\0');
  static const std::string kValue = [] {
    std::string r;
    FrameWriter(&r).bytes(std::string(kValueBytes, 'v'));
    return r;
  }();
  switch (static_cast<QueryType>(first_byte)) {
    case QueryType::kValidate: return &kTwoPingEchoes;  // connect + preload
    case QueryType::kSet: return &kPingEcho;            // SET + PING
    case QueryType::kGet: return &kValue;
    case QueryType::kAdd: return &kInt64;
    default: return nullptr;
  }
}

}  // namespace

int run_canned_reply_server() {
  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listen_fd, SOMAXCONN) != 0 ||
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::printf("floor server: cannot listen: %s\n", std::strerror(errno));
    return 1;
  }
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  std::printf("floor server listening on port %u\n", ntohs(addr.sin_port));
  std::fflush(stdout);

  // Level-triggered like our server: one recv per readiness, one send.
  std::vector<epoll_event> events(1024);
  std::vector<uint8_t> buf(64 << 10);
  for (;;) {
    const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd) {
        int client;
        while ((client = accept4(listen_fd, nullptr, nullptr,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          int one = 1;
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = client;
          epoll_ctl(epoll_fd, EPOLL_CTL_ADD, client, &cev);
        }
        continue;
      }
      const ssize_t got = recv(fd, buf.data(), buf.size(), 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      const std::string* reply = got > 0 ? canned_reply(buf[0]) : nullptr;
      // The closed loop has one request in flight per connection, so one
      // recv holds exactly one request: reply once.
      if (reply == nullptr ||
          send(fd, reply->data(), reply->size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(reply->size())) {
        close(fd);  // closing also removes it from the epoll set
      }
    }
  }
}

}  // namespace bench
}  // namespace ddpx
