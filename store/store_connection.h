// One client connection to a TCPStore server: connecting with exponential
// backoff and jitter (so clients may start before the server), the validate
// handshake, and blocking sends/receives bounded by a deadline. A server that
// goes away surfaces as an Unavailable error at once, never as a hang.
#ifndef DDPX_STORE_STORE_CONNECTION_H_
#define DDPX_STORE_STORE_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {

class StoreConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Retries refused/reset connections until `timeout` passes, then sends
  // VALIDATE and a PING and checks the echo.
  static absl::StatusOr<std::unique_ptr<StoreConnection>> connect(
      const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  absl::Status send(const std::string& bytes, Clock::time_point deadline);
  // Reads exactly n bytes into *out. DeadlineExceeded when the deadline
  // passes first; Unavailable when the server closes the connection.
  // Replies are read through a small buffer, so bytes of the next reply
  // that arrived together with this one wait there for the next call.
  absl::Status recv(size_t n, std::string* out, Clock::time_point deadline);
  // The replies below recognise our server's error reply (eight 0xFF bytes
  // and a reason, protocol::kErrorReplyMarker) where they begin, and return
  // it as ResourceExhausted naming the reason. An int64 reply cannot carry
  // one (any 8 bytes are a number), so recv_i64 does not look for it.
  absl::StatusOr<uint8_t> recv_u8(Clock::time_point deadline);
  absl::StatusOr<int64_t> recv_i64(Clock::time_point deadline);
  // uint64 length + bytes.
  absl::StatusOr<std::string> recv_bytes(Clock::time_point deadline);
  // A PING's nonce echo (a nonce is never 0xFFFFFFFF).
  absl::StatusOr<uint32_t> recv_echo(Clock::time_point deadline);

  // "127.0.0.1:29500", for error messages.
  const std::string& server() const { return server_; }

 private:
  StoreConnection(int fd, std::string server) : fd_(fd), server_(std::move(server)) {}
  static absl::StatusOr<int> connect_once(const std::string& host, uint16_t port,
                                          Clock::time_point deadline);
  absl::Status handshake(Clock::time_point deadline);
  // The rest of an error reply whose first `seen` marker bytes were read.
  absl::Status recv_error_reply(size_t seen, Clock::time_point deadline);
  // One recv of at most `room` bytes once the socket is readable.
  absl::StatusOr<size_t> recv_some(char* dst, size_t room, Clock::time_point deadline);

  // Reads below this size go through in_; larger rests go straight to the
  // caller's string.
  static constexpr size_t kReadChunk = 16 << 10;

  int fd_;
  std::string server_;
  std::string in_;     // received bytes not yet handed out, from in_pos_
  size_t in_pos_ = 0;
};

}  // namespace ddpx

#endif  // DDPX_STORE_STORE_CONNECTION_H_
