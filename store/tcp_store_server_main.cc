// Standalone TCPStore server: `bazel run //store:tcp_store_server -- --port=29500`.
// Prints the port it listens on (useful with --port=0), serves until SIGINT
// or SIGTERM.
#include <csignal>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "store/tcp_store_server.h"

ABSL_FLAG(int, port, 29500, "TCP port to listen on; 0 picks a free one");
ABSL_FLAG(std::string, host, "", "address to listen on; empty = every interface");
ABSL_FLAG(uint64_t, max_frame_length, ddpx::protocol::kDefaultMaxLength,
          "longest request frame accepted, in bytes");
ABSL_FLAG(uint64_t, max_pending_output, 2 * ddpx::protocol::kDefaultMaxLength,
          "output budget: reply bytes one connection may owe before a request "
          "is refused with an error reply");
ABSL_FLAG(uint64_t, max_memory, ddpx::TCPStoreServerOptions::kDefaultMaxMemory,
          "memory limit in bytes held for clients (values, partial requests, "
          "queued replies, waits); past it writes are refused; 0: none");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a TCPStore server (PyTorch-compatible) until SIGINT/SIGTERM.");
  absl::ParseCommandLine(argc, argv);
  const int port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "--port=%d is not a TCP port (0..65535)\n", port);
    return 2;
  }
  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ddpx::TCPStoreServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = static_cast<uint16_t>(port);
  options.max_frame_length = absl::GetFlag(FLAGS_max_frame_length);
  options.max_pending_output = absl::GetFlag(FLAGS_max_pending_output);
  options.max_memory = absl::GetFlag(FLAGS_max_memory);
  auto server = ddpx::TCPStoreServer::start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "tcp_store_server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("tcp_store_server listening on port %u\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "tcp_store_server: stopping on signal %d\n", sig);
  (*server)->stop();
  return 0;
}
