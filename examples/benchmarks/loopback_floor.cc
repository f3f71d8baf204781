#include "examples/benchmarks/loopback_floor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace ddpx {
namespace {

int checked(int rv, const char* what) {
  if (rv < 0) {
    std::fprintf(stderr, "loopback_floor: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
  }
  return rv;
}

}  // namespace

double loopback_tcp_bytes_per_second(size_t total_bytes) {
  constexpr size_t kChunk = size_t{4} << 20;
  const int listener = checked(socket(AF_INET, SOCK_STREAM, 0), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  checked(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), "bind");
  checked(listen(listener, 1), "listen");
  socklen_t len = sizeof(addr);
  checked(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");
  std::thread writer([&] {
    std::vector<char> data(kChunk, 1);
    const int s = checked(socket(AF_INET, SOCK_STREAM, 0), "socket");
    checked(connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), "connect");
    for (size_t sent = 0; sent < total_bytes;) {
      sent += checked(static_cast<int>(write(s, data.data(), std::min(kChunk, total_bytes - sent))),
                      "write");
    }
    close(s);
  });
  const int reader = checked(accept(listener, nullptr, nullptr), "accept");
  std::vector<char> data(kChunk);
  const auto start = std::chrono::steady_clock::now();
  size_t received = 0;
  for (ssize_t n; (n = read(reader, data.data(), kChunk)) > 0;) received += n;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.join();
  close(reader);
  close(listener);
  return received / seconds;
}

}  // namespace ddpx
