#include "store/store_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "store/protocol.h"
#include "store/socket_util.h"

namespace ddpx {

namespace {

int ms_until(StoreConnection::Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - StoreConnection::Clock::now());
  // Round up so a wait never ends before the deadline it was given.
  return static_cast<int>(std::max<int64_t>(0, left.count() + 1));
}

// Waits for `events` on fd; false on timeout.
absl::StatusOr<bool> wait_for(int fd, short events,
                              StoreConnection::Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, ms_until(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return errno_status("poll", errno);
    }
    if (rc == 0) {
      if (StoreConnection::Clock::now() < deadline) continue;
      return false;
    }
    return true;
  }
}

}  // namespace

StoreConnection::~StoreConnection() { close(fd_); }

absl::StatusOr<int> StoreConnection::connect_once(const std::string& host,
                                                  uint16_t port,
                                                  Clock::time_point deadline) {
  absl::StatusOr<AddrInfoList> addresses = resolve_tcp(host.c_str(), port, 0);
  if (!addresses.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot resolve store host '", host,
                                               "': ", addresses.status().message()));
  }
  absl::StatusOr<int> fd =
      first_usable_socket(addresses->get(), [&](int fd, const addrinfo& ai) {
        int err = 0;
        if (::connect(fd, ai.ai_addr, ai.ai_addrlen) < 0) {
          err = errno;
          if (err == EINPROGRESS) {
            absl::StatusOr<bool> ready = wait_for(fd, POLLOUT, deadline);
            socklen_t len = sizeof(err);
            if (!ready.ok() || !*ready) {
              err = ETIMEDOUT;
            } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
              err = errno;
            }
          }
        }
        return err == 0 ? absl::OkStatus() : errno_status("connect", err);
      });
  if (fd.ok()) (void)set_nodelay(*fd);
  return fd;
}

absl::StatusOr<std::unique_ptr<StoreConnection>> StoreConnection::connect(
    const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string server = absl::StrCat(host, ":", port);
  std::mt19937_64 rng(std::random_device{}());
  auto backoff = std::chrono::milliseconds(10);
  const auto max_backoff = std::chrono::milliseconds(1000);
  absl::Status last;
  int attempts = 0;
  for (;;) {
    ++attempts;
    absl::StatusOr<int> fd = connect_once(host, port, deadline);
    if (fd.ok()) {
      std::unique_ptr<StoreConnection> conn(new StoreConnection(*fd, server));
      last = conn->handshake(deadline);
      if (last.ok()) return conn;
    } else {
      last = fd.status();
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    // Full jitter: many clients started together do not retry in lockstep.
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    auto pause = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(jitter(rng)),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, max_backoff);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "store: could not connect to the store server at ", server, " within ",
      timeout.count(), " ms (", attempts, " attempts; last error: ",
      last.message(), ")"));
}

absl::Status StoreConnection::handshake(Clock::time_point deadline) {
  std::string frame;
  const uint32_t nonce = static_cast<uint32_t>(getpid());
  protocol::FrameWriter(&frame)
      .query(protocol::QueryType::kValidate)
      .u32(protocol::kValidationMagic)
      .query(protocol::QueryType::kPing)
      .u32(nonce);
  absl::Status s = send(frame, deadline);
  if (!s.ok()) return s;
  std::string echo;
  s = recv(4, &echo, deadline);
  if (!s.ok()) return s;
  uint32_t got = protocol::read_u32(reinterpret_cast<const uint8_t*>(echo.data()));
  if (got != nonce) {
    return absl::DataLossError(absl::StrCat("store server at ", server_,
                                            " answered PING ", nonce, " with ", got,
                                            "; is it a TCPStore server?"));
  }
  return absl::OkStatus();
}

absl::Status StoreConnection::send(const std::string& bytes, Clock::time_point deadline) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n >= 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return errno_status(absl::StrCat("store: sending to the server at ", server_), errno);
    }
    absl::StatusOr<bool> ready = wait_for(fd_, POLLOUT, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) {
      return absl::DeadlineExceededError(
          absl::StrCat("store: timed out sending a request to ", server_));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> StoreConnection::recv_some(char* dst, size_t room,
                                                  Clock::time_point deadline) {
  for (;;) {
    // Wait first: right after a request the reply is rarely there yet, and
    // a recv that ends in EAGAIN would be one more syscall per exchange.
    absl::StatusOr<bool> ready = wait_for(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) {
      return absl::DeadlineExceededError(
          absl::StrCat("store: timed out waiting for a reply from ", server_));
    }
    ssize_t got = ::recv(fd_, dst, room, 0);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) {
      return absl::UnavailableError(absl::StrCat(
          "store: the server at ", server_, " closed the connection"));
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return errno_status(absl::StrCat("store: receiving from the server at ", server_),
                        errno);
  }
}

absl::Status StoreConnection::recv(size_t n, std::string* out, Clock::time_point deadline) {
  out->resize(n);
  // What an earlier read already brought in comes first.
  size_t off = std::min(n, in_.size() - in_pos_);
  if (off > 0) std::memcpy(&(*out)[0], in_.data() + in_pos_, off);
  in_pos_ += off;
  while (off < n) {
    if (n - off >= kReadChunk) {
      // A large value: straight into *out, no copy through the buffer.
      absl::StatusOr<size_t> got = recv_some(&(*out)[off], n - off, deadline);
      if (!got.ok()) return got.status();
      off += *got;
      continue;
    }
    // A small rest: read a chunk, so that one recv takes a whole reply (a
    // GET's length and value) and the next read needs no syscall.
    in_.resize(kReadChunk);
    absl::StatusOr<size_t> got = recv_some(&in_[0], in_.size(), deadline);
    if (!got.ok()) {
      in_.clear();
      in_pos_ = 0;
      return got.status();
    }
    in_.resize(*got);
    in_pos_ = std::min(n - off, *got);
    std::memcpy(&(*out)[off], in_.data(), in_pos_);
    off += in_pos_;
  }
  if (in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  }
  return absl::OkStatus();
}

absl::Status StoreConnection::recv_error_reply(size_t seen, Clock::time_point deadline) {
  std::string rest;
  absl::Status s = recv(8 - seen, &rest, deadline);
  if (!s.ok()) return s;
  if (rest.find_first_not_of('\xff') != std::string::npos) {
    return absl::DataLossError(absl::StrCat("store: the server at ", server_,
                                            " sent an unexpected reply starting with 0xff"));
  }
  absl::StatusOr<int64_t> len = recv_i64(deadline);
  if (!len.ok()) return len.status();
  constexpr int64_t kLongestReason = 64 << 10;
  if (*len < 0 || *len > kLongestReason) {
    return absl::DataLossError(absl::StrCat("store: the server at ", server_,
                                            " sent an error reply of implausible length ", *len));
  }
  std::string reason;
  s = recv(static_cast<size_t>(*len), &reason, deadline);
  if (!s.ok()) return s;
  return absl::ResourceExhaustedError(
      absl::StrCat("store: the server at ", server_, " refused the request: ", reason));
}

absl::StatusOr<uint8_t> StoreConnection::recv_u8(Clock::time_point deadline) {
  std::string b;
  absl::Status s = recv(1, &b, deadline);
  if (!s.ok()) return s;
  if (static_cast<uint8_t>(b[0]) == 0xff) return recv_error_reply(1, deadline);
  return static_cast<uint8_t>(b[0]);
}

absl::StatusOr<int64_t> StoreConnection::recv_i64(Clock::time_point deadline) {
  std::string b;
  absl::Status s = recv(8, &b, deadline);
  if (!s.ok()) return s;
  return static_cast<int64_t>(protocol::read_u64(reinterpret_cast<const uint8_t*>(b.data())));
}

absl::StatusOr<uint32_t> StoreConnection::recv_echo(Clock::time_point deadline) {
  std::string b;
  absl::Status s = recv(4, &b, deadline);
  if (!s.ok()) return s;
  const uint32_t nonce = protocol::read_u32(reinterpret_cast<const uint8_t*>(b.data()));
  if (nonce == 0xffffffffu) return recv_error_reply(4, deadline);
  return nonce;
}

absl::StatusOr<std::string> StoreConnection::recv_bytes(Clock::time_point deadline) {
  absl::StatusOr<int64_t> len = recv_i64(deadline);
  if (!len.ok()) return len.status();
  if (static_cast<uint64_t>(*len) == protocol::kErrorReplyMarker) {
    return recv_error_reply(8, deadline);
  }
  if (*len < 0 || static_cast<uint64_t>(*len) > protocol::kDefaultMaxLength * 4) {
    return absl::DataLossError(absl::StrCat("store: the server at ", server_,
                                            " sent an implausible value length ", *len));
  }
  std::string value;
  absl::Status s = recv(static_cast<size_t>(*len), &value, deadline);
  if (!s.ok()) return s;
  return value;
}

}  // namespace ddpx
