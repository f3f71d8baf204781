// Several real processes rendezvous through the standalone server binary.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "examples/launcher/launcher.h"
#include "tests/store/subprocess.h"

namespace ddpx {
namespace store_test {
namespace {

using std::chrono::milliseconds;

// A port nobody listens on right now, outside the ephemeral range.
uint16_t free_port() { return static_cast<uint16_t>(launcher::pick_free_port()); }

Subprocess start_server(uint16_t port, uint16_t* bound) {
  auto server = Subprocess::spawn(
      {runfile("store/tcp_store_server"), absl::StrCat("--port=", port)});
  EXPECT_TRUE(server.ok()) << server.status();
  auto line = server->read_line(milliseconds(10000));
  EXPECT_TRUE(line.ok()) << line.status();
  // "tcp_store_server listening on port N"
  std::string text = line.ok() ? *line : "";
  unsigned parsed = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text.substr(text.rfind(' ') + 1), &parsed)) << text;
  *bound = static_cast<uint16_t>(parsed);
  return std::move(*server);
}

std::vector<Subprocess> start_workers(uint16_t port, int world,
                                      const std::string& mode = "rendezvous") {
  std::vector<Subprocess> workers;
  for (int r = 0; r < world; ++r) {
    auto w = Subprocess::spawn({runfile("tests/store/store_worker"),
                                absl::StrCat("--port=", port), absl::StrCat("--rank=", r),
                                absl::StrCat("--world=", world), "--mode=" + mode});
    EXPECT_TRUE(w.ok()) << w.status();
    workers.push_back(std::move(*w));
  }
  return workers;
}

void expect_all_succeed(std::vector<Subprocess>& workers) {
  for (size_t r = 0; r < workers.size(); ++r) {
    auto code = workers[r].wait(milliseconds(30000));
    std::string out = workers[r].read_rest(milliseconds(100));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << "rank " << r << ": " << out;
    EXPECT_NE(out.find(absl::StrCat("OK rank ", r)), std::string::npos) << out;
  }
}

TEST(TCPStoreProcesses, FourProcessesRendezvousThroughTheServerBinary) {
  uint16_t port = 0;
  Subprocess server = start_server(0, &port);
  ASSERT_NE(port, 0);
  std::vector<Subprocess> workers = start_workers(port, 4);
  expect_all_succeed(workers);
}

TEST(TCPStoreProcesses, WorkersStartedBeforeTheServerStillMeet) {
  const uint16_t port = free_port();
  std::vector<Subprocess> workers = start_workers(port, 3);
  std::this_thread::sleep_for(milliseconds(500));
  uint16_t bound = 0;
  Subprocess server = start_server(port, &bound);
  EXPECT_EQ(bound, port);
  expect_all_succeed(workers);
}

TEST(TCPStoreProcesses, KilledServerFailsAWaitingClientInsteadOfHanging) {
  uint16_t port = 0;
  Subprocess server = start_server(0, &port);
  std::vector<Subprocess> workers = start_workers(port, 1, "wait_forever");
  auto line = workers[0].read_line(milliseconds(10000));
  ASSERT_TRUE(line.ok()) << line.status();
  ASSERT_EQ(*line, "waiting");
  std::this_thread::sleep_for(milliseconds(100));
  server.kill(SIGKILL);
  auto start = std::chrono::steady_clock::now();
  auto code = workers[0].wait(milliseconds(10000));  // its timeout is 20 s
  ASSERT_TRUE(code.ok()) << "the client hung after the server died";
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  EXPECT_EQ(*code, 3);
  std::string out = workers[0].read_rest(milliseconds(100));
  EXPECT_NE(out.find("UNAVAILABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("closed the connection"), std::string::npos) << out;
  EXPECT_NE(out.find("[never-set]"), std::string::npos) << out;
}

}  // namespace
}  // namespace store_test
}  // namespace ddpx
