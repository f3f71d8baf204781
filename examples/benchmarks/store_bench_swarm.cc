#include "examples/benchmarks/store_bench_swarm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "store/protocol.h"

namespace ddpx {
namespace bench {

using protocol::FrameWriter;
using protocol::QueryType;
using Clock = std::chrono::steady_clock;

const char* op_name(Op op) {
  switch (op) {
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
  }
  return "?";
}

struct Swarm::Client {
  enum class Phase { kConnecting, kHello, kAdd, kWait, kIdle, kOp, kDone };
  int fd = -1;
  Phase phase = Phase::kConnecting;
  size_t expect = 0;  // reply bytes awaited
  std::string in;
  Clock::time_point sent;
};

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

sockaddr_in address(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  return a;
}

std::string hello() {
  std::string f;
  FrameWriter(&f)
      .query(QueryType::kValidate)
      .u32(protocol::kValidationMagic)
      .query(QueryType::kPing)
      .u32(1);
  return f;
}

bool send_all(int fd, const std::string& bytes) {
  // Requests are tiny; the socket buffer always takes them whole.
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

// Clients spread over 127.0.0.2-127.0.0.33 as source addresses, as if from
// 32 hosts: one address's ~28k ephemeral ports (with TIME_WAIT leftovers of
// earlier runs) would otherwise make connect() itself the bottleneck.
int open_socket(const sockaddr_in& addr, int index) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if ((ntohl(addr.sin_addr.s_addr) >> 24) == 127) {
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((127u << 24) | static_cast<uint32_t>(2 + index % 32));
    bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof(src));
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

Swarm::Swarm(std::string host, uint16_t port)
    : host_(std::move(host)), port_(port), epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {}

Swarm::~Swarm() {
  close_all();
  close(epoll_fd_);
}

void Swarm::close_all() {
  for (auto& c : clients_) {
    if (c && c->fd >= 0) close(c->fd);
  }
  clients_.clear();
}

size_t Swarm::open_connections() const {
  size_t n = 0;
  for (const auto& c : clients_) n += (c && c->fd >= 0);
  return n;
}

absl::StatusOr<double> Swarm::rendezvous(int n, int window, const std::string& tag,
                                         std::chrono::seconds timeout) {
  close_all();
  const sockaddr_in addr = address(host_, port_);
  const std::string count_key = absl::StrCat("/rdzv/", tag, "/count");
  const std::string barrier_key = absl::StrCat("/rdzv/", tag, "/go");
  const std::string hello_frame = hello();
  std::string add_frame, wait_frame, set_frame;
  FrameWriter(&add_frame).query(QueryType::kAdd).bytes(count_key).i64(1);
  FrameWriter(&wait_frame).query(QueryType::kWait).u64(1).bytes(barrier_key);
  FrameWriter(&set_frame).query(QueryType::kSet).bytes(barrier_key).bytes("1");
  const std::string set_and_wait = set_frame + wait_frame;

  clients_.resize(n);
  int next = 0, in_flight = 0, released = 0, retries = 0;
  auto start_connect = [&](int i) -> bool {
    Client& c = *clients_[i];
    c.fd = open_socket(addr, i);
    if (c.fd < 0) return false;
    c.phase = Client::Phase::kConnecting;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(i);
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev) == 0;
  };
  auto launch = [&]() -> bool {
    clients_[next] = std::make_unique<Client>();
    if (!start_connect(next)) return false;
    ++next;
    ++in_flight;
    return true;
  };

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  while (next < n && in_flight < window) {
    if (!launch()) return absl::InternalError(absl::StrCat("socket/connect: ", std::strerror(errno)));
  }
  std::vector<epoll_event> events(4096);
  char buf[256];
  while (released < n) {
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous of ", n, " clients: only ", released, " released, ", next,
          " started, after ", timeout.count(), " s"));
    }
    int k = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    for (int e = 0; e < k; ++e) {
      const int i = static_cast<int>(events[e].data.u32);
      Client& c = *clients_[i];
      if (c.phase == Client::Phase::kConnecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {  // refused or reset: retry, as a real client would
          ++retries;
          close(c.fd);
          if (!start_connect(i)) return absl::InternalError("reconnect failed");
          continue;
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = static_cast<uint32_t>(i);
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
        if (!send_all(c.fd, hello_frame)) return absl::InternalError("send hello");
        c.phase = Client::Phase::kHello;
        c.expect = 4;
        continue;
      }
      ssize_t got = recv(c.fd, buf, sizeof(buf), 0);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        return absl::UnavailableError(absl::StrCat(
            "server closed client ", i, " during the rendezvous (phase ",
            static_cast<int>(c.phase), ")"));
      }
      c.in.append(buf, static_cast<size_t>(got));
      if (c.in.size() < c.expect) continue;
      switch (c.phase) {
        case Client::Phase::kHello:
          c.in.clear();
          if (!send_all(c.fd, add_frame)) return absl::InternalError("send add");
          c.phase = Client::Phase::kAdd;
          c.expect = 8;
          break;
        case Client::Phase::kAdd: {
          int64_t arrived = static_cast<int64_t>(
              protocol::read_u64(reinterpret_cast<const uint8_t*>(c.in.data())));
          c.in.clear();
          --in_flight;
          while (next < n && in_flight < window) {
            if (!launch()) return absl::InternalError("socket/connect");
          }
          if (!send_all(c.fd, arrived == n ? set_and_wait : wait_frame)) {
            return absl::InternalError("send wait");
          }
          c.phase = Client::Phase::kWait;
          c.expect = 1;
          break;
        }
        case Client::Phase::kWait:
          c.in.clear();
          c.phase = Client::Phase::kIdle;
          ++released;
          break;
        default:
          return absl::InternalError("unexpected reply during the rendezvous");
      }
    }
  }
  (void)retries;
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::StatusOr<OpStats> Swarm::closed_loop(int nclients, Op op, double seconds) {
  close_all();
  const sockaddr_in addr = address(host_, port_);
  const std::string value(kValueBytes, 'v');
  std::vector<std::string> requests(nclients), preload(nclients);
  size_t reply_bytes = 0;
  for (int i = 0; i < nclients; ++i) {
    const std::string key = absl::StrCat("/bench/", i);
    FrameWriter(&preload[i]).query(QueryType::kSet).bytes(key).bytes(value)
        .query(QueryType::kPing).u32(2);
    switch (op) {
      case Op::kSet:
        requests[i] = preload[i];
        reply_bytes = 4;
        break;
      case Op::kGet:
        FrameWriter(&requests[i]).query(QueryType::kGet).bytes(key);
        reply_bytes = 8 + kValueBytes;
        break;
      case Op::kAdd:
        FrameWriter(&requests[i]).query(QueryType::kAdd).bytes(key + "/n").i64(1);
        reply_bytes = 8;
        break;
    }
  }
  // Connect and preload synchronously; only the loop below is timed.
  clients_.resize(nclients);
  const std::string hello_frame = hello();
  for (int i = 0; i < nclients; ++i) {
    clients_[i] = std::make_unique<Client>();
    Client& c = *clients_[i];
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0) {
      return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
    }
    std::string frames = hello_frame + preload[i];
    char buf[8];
    if (!send_all(c.fd, frames) || recv(c.fd, buf, 8, MSG_WAITALL) != 8) {
      return absl::UnavailableError("handshake/preload failed");
    }
    fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
  }

  std::vector<float> latencies_us;
  latencies_us.reserve(1 << 20);
  const double cpu_start = thread_cpu_seconds();
  const Clock::time_point start = Clock::now();
  const Clock::time_point stop_at =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  int active = nclients;
  for (int i = 0; i < nclients; ++i) {
    Client& c = *clients_[i];
    c.phase = Client::Phase::kOp;
    c.expect = reply_bytes;
    c.sent = Clock::now();
    if (!send_all(c.fd, requests[i])) return absl::InternalError("send");
  }
  std::vector<epoll_event> events(1024);
  char buf[4096];
  while (active > 0) {
    int k = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 1000);
    if (k == 0) return absl::DeadlineExceededError("server stopped answering");
    for (int e = 0; e < k; ++e) {
      const int i = static_cast<int>(events[e].data.u32);
      Client& c = *clients_[i];
      ssize_t got = recv(c.fd, buf, sizeof(buf), 0);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        return absl::UnavailableError("server closed a benchmark client");
      }
      c.in.append(buf, static_cast<size_t>(got));
      if (c.in.size() < c.expect) continue;
      const Clock::time_point now = Clock::now();
      latencies_us.push_back(
          std::chrono::duration<float, std::micro>(now - c.sent).count());
      c.in.clear();
      if (now >= stop_at) {
        c.phase = Client::Phase::kDone;
        --active;
        continue;
      }
      c.sent = now;
      if (!send_all(c.fd, requests[i])) return absl::InternalError("send");
    }
  }
  OpStats stats;
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stats.client_cpu_s = thread_cpu_seconds() - cpu_start;
  stats.ops = latencies_us.size();
  if (!latencies_us.empty()) {
    auto at = [&](double q) {
      size_t idx = std::min(latencies_us.size() - 1,
                            static_cast<size_t>(q * latencies_us.size()));
      std::nth_element(latencies_us.begin(), latencies_us.begin() + idx, latencies_us.end());
      return static_cast<double>(latencies_us[idx]);
    };
    stats.p50_us = at(0.50);
    stats.p99_us = at(0.99);
  }
  close_all();
  return stats;
}

}  // namespace bench
}  // namespace ddpx
