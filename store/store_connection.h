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
  absl::Status recv(size_t n, std::string* out, Clock::time_point deadline);
  absl::StatusOr<uint8_t> recv_u8(Clock::time_point deadline);
  absl::StatusOr<int64_t> recv_i64(Clock::time_point deadline);
  // uint64 length + bytes.
  absl::StatusOr<std::string> recv_bytes(Clock::time_point deadline);

  // "127.0.0.1:29500", for error messages.
  const std::string& server() const { return server_; }

 private:
  StoreConnection(int fd, std::string server) : fd_(fd), server_(std::move(server)) {}
  static absl::StatusOr<int> connect_once(const std::string& host, uint16_t port,
                                          Clock::time_point deadline);
  absl::Status handshake(Clock::time_point deadline);

  int fd_;
  std::string server_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_STORE_CONNECTION_H_
