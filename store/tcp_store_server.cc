#include "store/tcp_store_server.h"

#include <malloc.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <new>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "store/input_buffer.h"
#include "store/reply_queue.h"
#include "store/socket_util.h"
#include "store/stored_value.h"
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

using Clock = std::chrono::steady_clock;

// A peer's address as one number: IPv6 as is, IPv4 as its IPv4-mapped IPv6
// form (so a dual-stack listener counts 127.0.0.1 once however it arrives).
absl::uint128 address_key(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    const uint32_t v4 = ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr);
    return absl::MakeUint128(0, (uint64_t{0xffff} << 32) | v4);
  }
  if (addr.ss_family == AF_INET6) {
    const uint8_t* b = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr.s6_addr;
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; ++i) hi = (hi << 8) | b[i];
    for (int i = 8; i < 16; ++i) lo = (lo << 8) | b[i];
    return absl::MakeUint128(hi, lo);
  }
  return 0;
}

// The per-address limit in force: the option, but at most half of the
// open-file limit, so one address cannot take every descriptor.
uint32_t connections_per_address_limit(uint32_t option) {
  if (option == 0) return 0;
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return option;
  const uint64_t half = std::max<uint64_t>(64, files.rlim_cur / 2);
  return static_cast<uint32_t>(std::min<uint64_t>(option, half));
}

// Per-connection state. Kept small: an idle connection owns no buffers (they
// are released once drained), which keeps the server near 0.3 KiB per idle
// client.
struct Connection {
  explicit Connection(MemoryMeter* meter) : out(meter) {}
  int fd = -1;
  ClientId id = 0;
  bool validated = false;
  bool reading = true;          // EPOLLIN wanted (off while a list runs)
  bool want_write = false;      // EPOLLOUT wanted
  uint32_t registered = 0;      // the events epoll has now
  size_t need = 0;              // bytes `in` must hold before decoding again
  protocol::FrameDecoder::Progress progress;  // of the frame at in[0]
  InputBuffer in;               // an incomplete request, or one being run
  uint64_t in_counted = 0;      // in's capacity, as counted in the meter
  ReplyQueue out;               // replies not yet accepted by the kernel
  std::unique_ptr<ListWork> work;  // a list request running in slices
  size_t work_frame = 0;        // its frame's length, at in[0]
  bool wake_lost = false;       // its STOP_WAITING could not be queued (no memory)
  absl::uint128 address = 0;    // the peer's, as counted in per_address_
};


}  // namespace

class TCPStoreServer::Loop {
 public:
  Loop(const TCPStoreServerOptions& options, int listen_fd, int epoll_fd, int wake_fd)
      : options_(options),
        meter_(options.max_memory),
        decoder_(options.max_frame_length),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        scratch_(64 << 10),
        state_(&meter_, options.max_pending_output,
               [this](ClientId id) { on_wake(id); }),
        per_address_limit_(connections_per_address_limit(options.max_connections_per_address)) {
    stats_.max_connections_per_address = per_address_limit_;
  }

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
    Stats s = stats_;
    s.memory_used = meter_.used();
    s.memory_limit = meter_.limit();
    return s;
  }

 private:
  void accept_all();
  // Whether a connection from `address` may be served (its address holds
  // fewer than the limit); logs refusals, at most once a second.
  bool admit(int fd, absl::uint128 address);
  // Closes the connections that did not VALIDATE in time; returns how long
  // epoll may sleep before the next deadline (-1: none pending).
  int expire_handshakes();
  void on_event(Connection* c, uint32_t events);
  void on_readable(Connection* c);
  // Decodes and applies the complete requests in [data, data+size), up to a
  // list request that needs more slices; returns the bytes consumed (that
  // request's frame not included), or -1 if the connection was closed.
  long process(Connection* c, const uint8_t* data, size_t size);
  // Runs one slice of every running list request.
  void run_slices();
  void run_slice(Connection* c);
  // Keeps [from, end) of the bytes just processed as the connection's input.
  void keep_input(Connection* c, const uint8_t* data, size_t used, size_t size);
  bool flush(Connection* c);
  void flush_woken();
  void on_wake(ClientId id);
  // Drops the clients whose STOP_WAITING could not be queued; false if
  // `current` was one of them.
  bool drop_lost_wakes(ClientId current);
  void set_events(Connection* c);
  Connection* find(ClientId id);
  // A failed request: a refusal gets an error reply, then the connection is
  // closed; anything else is a protocol violation and the client is dropped.
  void fail(Connection* c, protocol::QueryType type, const absl::Status& why);
  void drop(Connection* c, const std::string& reason);
  void out_of_memory(ClientId id);
  void close_connection(Connection* c);
  // Hands the allocator's free pages back to the system after a large
  // release (a departed waiter's registrations, a big request), so the
  // process's RSS follows what the server holds rather than its peak.
  void return_freed_memory();

  const TCPStoreServerOptions options_;
  MemoryMeter meter_;  // first: outlives every value and queue below
  const FrameDecoder decoder_;
  const int listen_fd_, epoll_fd_, wake_fd_;
  std::vector<uint8_t> scratch_;           // one read buffer for everyone
  std::vector<std::unique_ptr<Connection>> connections_;  // indexed by fd
  StoreState state_;
  uint64_t next_id_ = 1;
  bool accept_paused_ = false;  // out of fds: retry accepting shortly
  ClientId current_ = 0;        // whose request is being applied
  std::vector<ClientId> woken_;  // other clients owed a flush
  std::vector<ClientId> busy_;   // clients with a list request running
  bool wakes_lost_ = false;      // some Connection::wake_lost is set
  uint64_t held_peak_ = 0;       // the most meter_ held since the last trim
  const uint32_t per_address_limit_;  // 0: none
  absl::flat_hash_map<absl::uint128, uint32_t> per_address_;  // open connections
  // Connections owing VALIDATE, by deadline (accept order, one timeout).
  std::deque<std::pair<Clock::time_point, ClientId>> handshakes_;
  Clock::time_point last_refusal_log_{};
  uint64_t refusals_unlogged_ = 0;
  protocol::Request request_;

  mutable std::mutex stats_mu_;
  Stats stats_;
};

void TCPStoreServer::Loop::run() {
  std::vector<epoll_event> events(1024);
  for (;;) {
    // While list requests run, poll without blocking between their slices.
    int timeout_ms = !busy_.empty() ? 0 : accept_paused_ ? 100 : -1;
    const int handshake_ms = expire_handshakes();
    if (handshake_ms >= 0 && (timeout_ms < 0 || handshake_ms < timeout_ms)) {
      timeout_ms = handshake_ms;
    }
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
      const ClientId id = c->id;
      try {
        on_event(c, events[i].events);
      } catch (const std::bad_alloc&) {
        out_of_memory(id);
      }
    }
    if (!busy_.empty()) run_slices();
    return_freed_memory();
  }
}

void TCPStoreServer::Loop::return_freed_memory() {
  constexpr uint64_t kTrimAfter = 16 << 20;
  const uint64_t held = meter_.used();
  if (held >= held_peak_) {
    held_peak_ = held;
    return;
  }
  if (held_peak_ - held < kTrimAfter) return;
  held_peak_ = held;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void TCPStoreServer::Loop::on_event(Connection* c, uint32_t events) {
  const int fd = c->fd;
  if (events & EPOLLOUT) {
    if (!flush(c)) return;
  }
  if (connections_[fd].get() == c && c->reading &&
      (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    on_readable(c);
  }
}

int TCPStoreServer::Loop::expire_handshakes() {
  const Clock::time_point now = Clock::now();
  while (!handshakes_.empty() && handshakes_.front().first <= now) {
    Connection* c = find(handshakes_.front().second);
    handshakes_.pop_front();
    if (c != nullptr && !c->validated) {
      drop(c, absl::StrCat("no VALIDATE within ", options_.validate_timeout.count(),
                           " ms of connecting"));
    }
  }
  if (handshakes_.empty()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      handshakes_.front().first - now);
  return static_cast<int>(left.count()) + 1;  // rounded up: never wake early
}

bool TCPStoreServer::Loop::admit(int fd, absl::uint128 address) {
  if (per_address_limit_ == 0) return true;
  auto it = per_address_.find(address);
  if (it == per_address_.end() || it->second < per_address_limit_) return true;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.refused;
  }
  ++refusals_unlogged_;
  const Clock::time_point now = Clock::now();
  if (options_.log_drops && now - last_refusal_log_ >= std::chrono::seconds(1)) {
    std::fprintf(stderr,
                 "[ddpx store server] refusing %llu connection(s), the latest from %s: "
                 "its address holds %u open connections, the limit per address "
                 "(max_connections_per_address)\n",
                 static_cast<unsigned long long>(refusals_unlogged_), peer_name(fd).c_str(),
                 per_address_limit_);
    last_refusal_log_ = now;
    refusals_unlogged_ = 0;
  }
  return false;
}

void TCPStoreServer::Loop::accept_all() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    const absl::uint128 address = address_key(peer);
    if (!admit(fd, address)) {
      close(fd);
      continue;
    }
    (void)set_nodelay(fd);
    try {
      if (static_cast<size_t>(fd) >= connections_.size()) {
        connections_.resize(static_cast<size_t>(fd) + 1024);
      }
      auto c = std::make_unique<Connection>(&meter_);
      c->fd = fd;
      c->id = (next_id_++ << 32) | static_cast<uint32_t>(fd);
      c->registered = EPOLLIN | EPOLLRDHUP;
      epoll_event ev{};
      ev.events = c->registered;
      ev.data.fd = fd;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        continue;
      }
      c->address = address;
      if (options_.validate_timeout.count() > 0) {
        handshakes_.emplace_back(Clock::now() + options_.validate_timeout, c->id);
      }
      ++per_address_[address];
      connections_[fd] = std::move(c);
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "[ddpx store server] out of memory accepting a client\n");
      close(fd);
      continue;
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.accepted;
    ++stats_.active;
  }
}

void TCPStoreServer::Loop::keep_input(Connection* c, const uint8_t* data, size_t used,
                                      size_t size) {
  if (reinterpret_cast<const char*>(data) == c->in.data()) {
    c->in.erase_front(used);
  } else {
    c->in.assign(reinterpret_cast<const char*>(data) + used, size - used);
  }
  if (c->in.empty()) c->in.release();
  meter_.change(&c->in_counted, c->in.capacity());
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
    const size_t size = static_cast<size_t>(got);
    if (c->in.empty()) {
      // Fast path: decode straight from the read buffer, keep only a tail.
      long used = process(c, scratch_.data(), size);
      if (used < 0) return;
      keep_input(c, scratch_.data(), static_cast<size_t>(used), size);
    } else {
      c->in.append(reinterpret_cast<const char*>(scratch_.data()), size);
      meter_.change(&c->in_counted, c->in.capacity());
      if (c->in.size() >= c->need) {
        const uint8_t* data = reinterpret_cast<const uint8_t*>(c->in.data());
        long used = process(c, data, c->in.size());
        if (used < 0) return;
        keep_input(c, data, static_cast<size_t>(used), c->in.size());
      }
    }
    if (c->in.size() > scratch_.size() && !meter_.fits(0)) {
      fail(c, static_cast<protocol::QueryType>(c->in[0]),
           absl::ResourceExhaustedError(absl::StrCat(
               "a request of at least ", c->in.size(),
               " bytes refused while the server holds ", meter_.used(),
               " bytes, past its memory limit of ", meter_.limit(), " bytes")));
      return;
    }
    if (c->work) break;  // no more reading until the list request is done
    if (size < scratch_.size()) break;
  }
  flush(c);
}

long TCPStoreServer::Loop::process(Connection* c, const uint8_t* data, size_t size) {
  size_t pos = 0;
  current_ = c->id;
  while (pos < size) {
    FrameDecoder::Result r = decoder_.decode(data + pos, size - pos, &request_, &c->progress);
    if (r.outcome == FrameDecoder::Outcome::kNeedMore) {
      c->need = r.need_at_least;
      break;
    }
    if (r.outcome == FrameDecoder::Outcome::kMalformed) {
      drop(c, r.error);
      return -1;
    }
    c->need = 0;
    if (!c->validated && request_.type != QueryType::kValidate) {
      drop(c, absl::StrCat(protocol::query_type_name(request_.type),
                           " request before VALIDATE"));
      return -1;
    }
    absl::Status s = state_.apply(c->id, request_, reinterpret_cast<const char*>(data + pos),
                                  &c->out, &c->work);
    flush_woken();
    if (!drop_lost_wakes(c->id)) return -1;
    if (!s.ok()) {
      fail(c, request_.type, s);
      return -1;
    }
    if (request_.type == QueryType::kValidate) c->validated = true;
    if (c->work) {
      // The rest runs in slices between other clients' requests; the frame
      // stays in `in` meanwhile, and nothing more is read.
      c->work_frame = r.consumed;
      c->reading = false;
      busy_.push_back(c->id);
      set_events(c);
      break;
    }
    pos += r.consumed;
    if (c->out.owed() > options_.max_pending_output) {
      drop(c, absl::StrCat("not reading its responses (owes ", c->out.owed(),
                           " bytes, past the output budget of ",
                           options_.max_pending_output, ")"));
      return -1;
    }
  }
  return static_cast<long>(pos);
}

void TCPStoreServer::Loop::run_slices() {
  std::vector<ClientId> running;
  running.swap(busy_);
  for (ClientId id : running) {
    Connection* c = find(id);
    if (c == nullptr || !c->work) continue;
    try {
      run_slice(c);
    } catch (const std::bad_alloc&) {
      out_of_memory(id);
    }
  }
}

void TCPStoreServer::Loop::run_slice(Connection* c) {
  current_ = c->id;
  absl::Status s = state_.resume(c->id, c->in.data(), &c->out, &c->work);
  flush_woken();
  if (!drop_lost_wakes(c->id)) return;
  if (!s.ok()) {
    const auto type = static_cast<QueryType>(c->in[0]);
    fail(c, type, s);
    return;
  }
  if (c->work) {
    busy_.push_back(c->id);
    return;
  }
  // Done: go on with whatever followed the frame, then read again.
  c->in.erase_front(c->work_frame);
  const uint8_t* data = reinterpret_cast<const uint8_t*>(c->in.data());
  long used = c->in.empty() ? 0 : process(c, data, c->in.size());
  if (used < 0) return;
  keep_input(c, data, static_cast<size_t>(used), c->in.size());
  if (!c->work) c->reading = true;
  if (flush(c)) set_events(c);
}

Connection* TCPStoreServer::Loop::find(ClientId id) {
  size_t fd = static_cast<uint32_t>(id);
  if (fd >= connections_.size() || !connections_[fd]) return nullptr;
  Connection* c = connections_[fd].get();
  return c->id == id ? c : nullptr;
}

void TCPStoreServer::Loop::on_wake(ClientId id) {
  Connection* w = find(id);
  if (w == nullptr) return;
  // Called while the store counts off a key's waiters: throwing here would
  // leave the rest of them waiting forever, so a wake-up that cannot be
  // queued marks its client for dropping instead (it then fails at once).
  try {
    w->out.u8(static_cast<uint8_t>(protocol::WaitResponse::kStopWaiting));
    // The client whose request is being applied (it may wake itself by
    // pipelining WAIT then SET) is flushed once its batch is done.
    if (id != current_) woken_.push_back(id);
  } catch (const std::bad_alloc&) {
    w->wake_lost = true;
    wakes_lost_ = true;
  }
}

bool TCPStoreServer::Loop::drop_lost_wakes(ClientId current) {
  if (!wakes_lost_) return true;
  wakes_lost_ = false;
  bool current_kept = true;
  for (auto& slot : connections_) {
    if (!slot || !slot->wake_lost) continue;
    if (slot->id == current) current_kept = false;
    out_of_memory(slot->id);
  }
  return current_kept;
}

void TCPStoreServer::Loop::flush_woken() {
  for (ClientId id : woken_) {
    Connection* w = find(id);
    if (w != nullptr) flush(w);
  }
  woken_.clear();
}

void TCPStoreServer::Loop::set_events(Connection* c) {
  const uint32_t want = (c->reading ? EPOLLIN | EPOLLRDHUP : 0) |
                        (c->want_write ? EPOLLOUT : 0);
  if (want == c->registered) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->registered = want;
}

bool TCPStoreServer::Loop::flush(Connection* c) {
  const int err = c->out.send_to(c->fd);
  if (err != 0 && err != EAGAIN && err != EWOULDBLOCK) {
    drop(c, absl::StrCat("write failed: ", std::strerror(err)));
    return false;
  }
  c->want_write = !c->out.empty();
  set_events(c);
  return true;
}

void TCPStoreServer::Loop::fail(Connection* c, QueryType type, const absl::Status& why) {
  if (!absl::IsResourceExhausted(why)) {
    drop(c, std::string(why.message()));
    return;
  }
  // An ADD's reply is an int64 that any 8 bytes can be, so an error reply
  // could be read as a number: it gets the close alone.
  if (type != QueryType::kAdd) {
    c->out.u64(protocol::kErrorReplyMarker);
    c->out.bytes(why.message());
    (void)c->out.send_to(c->fd);
  }
  drop(c, absl::StrCat("refused ", protocol::query_type_name(type), ": ", why.message()));
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

void TCPStoreServer::Loop::out_of_memory(ClientId id) {
  // Nothing here may allocate: memory just ran out.
  woken_.clear();
  Connection* c = find(id);
  if (c == nullptr) return;
  if (options_.log_drops) {
    std::fprintf(stderr,
                 "[ddpx store server] dropping client on fd %d: out of memory while "
                 "serving it (the other clients and every stored value are kept)\n",
                 c->fd);
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.dropped;
    ++stats_.out_of_memory;
    try {
      stats_.last_drop_reason = "out of memory while serving this client";
    } catch (const std::bad_alloc&) {
    }
  }
  close_connection(c);
}

void TCPStoreServer::Loop::close_connection(Connection* c) {
  state_.forget(c->id);
  auto counted = per_address_.find(c->address);
  if (counted != per_address_.end() && --counted->second == 0) per_address_.erase(counted);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  meter_.change(&c->in_counted, 0);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    --stats_.active;
  }
  connections_[c->fd].reset();
}

absl::StatusOr<std::unique_ptr<TCPStoreServer>> TCPStoreServer::start(
    const TCPStoreServerOptions& options) {
  absl::StatusOr<int> listen_fd = listen_on(options.host, options.port, host_listen_backlog());
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
