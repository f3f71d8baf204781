#include "tests/store/raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "store/protocol.h"

namespace ddpx {
namespace store_test {

using Clock = std::chrono::steady_clock;

RawClient::RawClient(uint16_t port, const char* source) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

bool RawClient::send_bytes(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

void RawClient::validate() {
  std::string f;
  protocol::FrameWriter(&f)
      .query(protocol::QueryType::kValidate)
      .u32(protocol::kValidationMagic);
  send_bytes(f);
}

bool RawClient::closed_by_server(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  char buf[65536];
  while (Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

std::string RawClient::read_exactly(size_t n, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[65536];
  while (out.size() < n && Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    ssize_t got = recv(fd_, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) return "";
    out.append(buf, static_cast<size_t>(got));
  }
  return out.size() == n ? out : "";
}

std::string RawClient::read_until_closed(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[65536];
  while (Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    ssize_t got = recv(fd_, buf, sizeof(buf), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

void RawClient::close_now() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace store_test
}  // namespace ddpx
