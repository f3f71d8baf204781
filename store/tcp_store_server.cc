#include "store/tcp_store_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/socket_util.h"
#include "store/store_state.h"

namespace ddpx {

using protocol::FrameDecoder;
using protocol::QueryType;

int host_listen_backlog() {
  std::ifstream f("/proc/sys/net/core/somaxconn");
  int n = 0;
  if (f >> n && n > 0) return n;
  return SOMAXCONN;
}

namespace {

// Per-connection state. Kept small: an idle connection owns no buffers (they
// are released once drained), which keeps the server near 0.2 KiB per idle
// client.
struct Connection {
  int fd = -1;
  ClientId id = 0;
  bool validated = false;
  bool want_write = false;     // EPOLLOUT registered
  size_t need = 0;             // bytes `in` must hold before decoding again
  std::string in;              // an incomplete request, if any
  std::string out;             // responses not yet accepted by the kernel
  size_t out_sent = 0;
};

void release(std::string& s) { std::string().swap(s); }

// Binds a listening socket for `host` ("" = every interface) and `port`.
absl::StatusOr<int> listen_on(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = absl::StrCat(port);
  // With no host, try the IPv6 wildcard first (dual stack), then IPv4.
  const char* node = host.empty() ? "::" : host.c_str();
  int rc = getaddrinfo(node, port_text.c_str(), &hints, &res);
  if (rc != 0 && host.empty()) {
    node = "0.0.0.0";
    rc = getaddrinfo(node, port_text.c_str(), &hints, &res);
  }
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store server: cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address to bind");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
      last = errno_status("socket", errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        listen(fd, host_listen_backlog()) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    last = errno_status(absl::StrCat("store server: bind/listen on ", node, ":", port), errno);
    close(fd);
  }
  freeaddrinfo(res);
  return last;
}

}  // namespace

class TCPStoreServer::Loop {
 public:
  Loop(const TCPStoreServerOptions& options, int listen_fd, int epoll_fd, int wake_fd)
      : options_(options),
        decoder_(options.max_frame_length),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        scratch_(64 << 10) {}

  ~Loop() {
    for (auto& c : connections_) {
      if (c) close(c->fd);
    }
    close(listen_fd_);
    close(epoll_fd_);
    close(wake_fd_);
  }

  void run();
  void request_stop() {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

 private:
  void accept_all();
  void on_readable(Connection* c);
  // Decodes and applies every complete request in [data, data+size); returns
  // the bytes consumed, or -1 if the connection was dropped.
  long process(Connection* c, const uint8_t* data, size_t size);
  void flush(Connection* c);
  void wake(const std::vector<ClientId>& woken, ClientId current);
  Connection* find(ClientId id);
  void drop(Connection* c, const std::string& reason);
  void close_connection(Connection* c);

  const TCPStoreServerOptions options_;
  const FrameDecoder decoder_;
  const int listen_fd_, epoll_fd_, wake_fd_;
  std::vector<uint8_t> scratch_;           // one read buffer for everyone
  std::vector<std::unique_ptr<Connection>> connections_;  // indexed by fd
  StoreState state_;
  uint64_t next_id_ = 1;
  bool accept_paused_ = false;  // out of fds: retry accepting shortly
  std::vector<ClientId> woken_;
  protocol::Request request_;

  mutable std::mutex stats_mu_;
  Stats stats_;
};

void TCPStoreServer::Loop::run() {
  std::vector<epoll_event> events(1024);
  for (;;) {
    int timeout_ms = accept_paused_ ? 100 : -1;
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                       timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "[ddpx store server] epoll_wait failed: %s\n",
                   std::strerror(errno));
      return;
    }
    if (n == 0 && accept_paused_) {
      accept_paused_ = false;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) return;
      if (fd == listen_fd_) {
        accept_all();
        continue;
      }
      Connection* c = static_cast<size_t>(fd) < connections_.size()
                          ? connections_[fd].get() : nullptr;
      if (c == nullptr) continue;
      if (events[i].events & EPOLLOUT) {
        flush(c);
        if (connections_[fd].get() != c) continue;  // dropped while flushing
      }
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        on_readable(c);
      }
    }
  }
}

void TCPStoreServer::Loop::accept_all() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::fprintf(stderr,
                     "[ddpx store server] cannot accept more clients (%s); "
                     "retrying in 100 ms\n", std::strerror(errno));
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
      }
      return;  // EAGAIN: no more pending connections
    }
    (void)set_nodelay(fd);
    if (static_cast<size_t>(fd) >= connections_.size()) {
      connections_.resize(static_cast<size_t>(fd) + 1024);
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->id = (next_id_++ << 32) | static_cast<uint32_t>(fd);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
      close(fd);
      continue;
    }
    connections_[fd] = std::move(c);
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.accepted;
    ++stats_.active;
  }
}

void TCPStoreServer::Loop::on_readable(Connection* c) {
  for (int round = 0; round < 16; ++round) {  // then yield to other clients
    ssize_t got = recv(c->fd, scratch_.data(), scratch_.size(), 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      drop(c, absl::StrCat("read failed: ", std::strerror(errno)));
      return;
    }
    if (got == 0) {
      if (!c->in.empty()) {
        drop(c, absl::StrCat("disconnected mid-frame, ", c->in.size(),
                             " bytes into an incomplete request"));
      } else if (state_.is_waiting(c->id)) {
        drop(c, "disconnected while waiting for keys");
      } else {
        close_connection(c);
      }
      return;
    }
    const uint8_t* data = scratch_.data();
    size_t size = static_cast<size_t>(got);
    if (c->in.empty()) {
      // Fast path: decode straight from the read buffer, keep only a tail.
      long used = process(c, data, size);
      if (used < 0) return;
      c->in.assign(reinterpret_cast<const char*>(data) + used, size - used);
    } else {
      c->in.append(reinterpret_cast<const char*>(data), size);
      if (c->in.size() >= c->need) {
        long used = process(c, reinterpret_cast<const uint8_t*>(c->in.data()),
                            c->in.size());
        if (used < 0) return;
        c->in.erase(0, static_cast<size_t>(used));
      }
    }
    if (c->in.empty()) release(c->in);
    if (static_cast<size_t>(got) < scratch_.size()) break;
  }
  flush(c);
}

long TCPStoreServer::Loop::process(Connection* c, const uint8_t* data, size_t size) {
  size_t pos = 0;
  woken_.clear();
  while (pos < size) {
    FrameDecoder::Result r = decoder_.decode(data + pos, size - pos, &request_);
    if (r.outcome == FrameDecoder::Outcome::kNeedMore) {
      c->need = r.need_at_least;
      break;
    }
    if (r.outcome == FrameDecoder::Outcome::kMalformed) {
      drop(c, r.error);
      return -1;
    }
    pos += r.consumed;
    c->need = 0;
    if (!c->validated && request_.type != QueryType::kValidate) {
      drop(c, absl::StrCat(protocol::query_type_name(request_.type),
                           " request before VALIDATE"));
      return -1;
    }
    absl::Status s = state_.apply(c->id, request_, &c->out, &woken_);
    if (!s.ok()) {
      drop(c, std::string(s.message()));
      return -1;
    }
    if (request_.type == QueryType::kValidate) c->validated = true;
    if (!woken_.empty()) {
      // Right away, so a client that wakes itself gets STOP_WAITING before
      // the replies to its later requests.
      wake(woken_, c->id);
      woken_.clear();
    }
    if (c->out.size() - c->out_sent > options_.max_pending_output) {
      drop(c, absl::StrCat("not reading its responses (", c->out.size(),
                           " bytes pending)"));
      return -1;
    }
  }
  return static_cast<long>(pos);
}

Connection* TCPStoreServer::Loop::find(ClientId id) {
  size_t fd = static_cast<uint32_t>(id);
  if (fd >= connections_.size() || !connections_[fd]) return nullptr;
  Connection* c = connections_[fd].get();
  return c->id == id ? c : nullptr;
}

void TCPStoreServer::Loop::wake(const std::vector<ClientId>& woken, ClientId current) {
  const char stop = static_cast<char>(protocol::WaitResponse::kStopWaiting);
  for (ClientId id : woken) {
    Connection* w = find(id);
    if (w == nullptr) continue;
    w->out.push_back(stop);
    // The client whose request is being processed (it may wake itself by
    // pipelining WAIT then SET) is flushed by on_readable once its batch is
    // done; flushing it here could drop it under the caller's feet.
    if (id != current) flush(w);
  }
}

void TCPStoreServer::Loop::flush(Connection* c) {
  while (c->out_sent < c->out.size()) {
    ssize_t sent = send(c->fd, c->out.data() + c->out_sent,
                        c->out.size() - c->out_sent, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      drop(c, absl::StrCat("write failed: ", std::strerror(errno)));
      return;
    }
    c->out_sent += static_cast<size_t>(sent);
  }
  bool pending = c->out_sent < c->out.size();
  if (!pending) {
    c->out_sent = 0;
    if (c->out.capacity() > 4096) {
      release(c->out);
    } else {
      c->out.clear();
    }
  } else if (c->out_sent > (1 << 20)) {
    c->out.erase(0, c->out_sent);
    c->out_sent = 0;
  }
  if (pending != c->want_write) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (pending ? EPOLLOUT : 0);
    ev.data.fd = c->fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_write = pending;
  }
}

void TCPStoreServer::Loop::drop(Connection* c, const std::string& reason) {
  std::string who = peer_name(c->fd);
  if (options_.log_drops) {
    std::fprintf(stderr, "[ddpx store server] dropping client %s: %s\n",
                 who.c_str(), reason.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.dropped;
    stats_.last_drop_reason = reason;
  }
  close_connection(c);
}

void TCPStoreServer::Loop::close_connection(Connection* c) {
  state_.forget(c->id);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    --stats_.active;
  }
  connections_[c->fd].reset();
}

absl::StatusOr<std::unique_ptr<TCPStoreServer>> TCPStoreServer::start(
    const TCPStoreServerOptions& options) {
  absl::StatusOr<int> listen_fd = listen_on(options.host, options.port);
  if (!listen_fd.ok()) return listen_fd.status();
  absl::StatusOr<uint16_t> port = local_port(*listen_fd);
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!port.ok() || epoll_fd < 0 || wake_fd < 0) {
    absl::Status err = port.ok() ? errno_status("store server: epoll/eventfd", errno)
                                 : port.status();
    close(*listen_fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    return err;
  }
  for (int fd : {*listen_fd, wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  std::unique_ptr<TCPStoreServer> server(new TCPStoreServer());
  server->port_ = *port;
  server->loop_ = std::make_unique<Loop>(options, *listen_fd, epoll_fd, wake_fd);
  Loop* loop = server->loop_.get();
  server->thread_ = std::thread([loop] { loop->run(); });
  return server;
}

void TCPStoreServer::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!thread_.joinable()) return;
  loop_->request_stop();
  thread_.join();
  final_stats_ = loop_->stats();
  loop_.reset();  // closes every connection
}

TCPStoreServer::~TCPStoreServer() { stop(); }

TCPStoreServer::Stats TCPStoreServer::stats() const {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!loop_) return final_stats_;
  return loop_->stats();
}

}  // namespace ddpx
