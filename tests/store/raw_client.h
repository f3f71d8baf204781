// A client speaking raw protocol bytes over a blocking socket, for tests
// that send what no well-behaved client would: garbage, huge frames,
// pipelined requests, requests whose replies it never reads.
#ifndef DDPX_TESTS_STORE_RAW_CLIENT_H_
#define DDPX_TESTS_STORE_RAW_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace ddpx {
namespace store_test {

class RawClient {
 public:
  // Connects to 127.0.0.1:port, from `source` (an IPv4 loopback address)
  // when given.
  explicit RawClient(uint16_t port, const char* source = nullptr);
  ~RawClient() { close_now(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // Sends every byte (blocking); false if the server closed meanwhile.
  bool send_bytes(const std::string& bytes);
  // VALIDATE with the right magic.
  void validate();
  // True when the server closed the connection within the timeout (reading
  // and discarding any replies before that).
  bool closed_by_server(std::chrono::milliseconds timeout);
  // Reads exactly n bytes ("" on timeout or close).
  std::string read_exactly(size_t n, std::chrono::milliseconds timeout);
  // Reads until the server closes or the timeout passes; what arrived.
  std::string read_until_closed(std::chrono::milliseconds timeout);
  void close_now();

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace store_test
}  // namespace ddpx

#endif  // DDPX_TESTS_STORE_RAW_CLIENT_H_
