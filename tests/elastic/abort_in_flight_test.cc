// The heartbeat's verdict aborts the ops in flight: three processes form an
// elastic group (tests/elastic/abort_member.cc) over a store this test
// serves; rank 2 stops itself (SIGSTOP) and the other two start an
// allreduce with a 60 s timeout that waits for it. Each must fail within a
// few seconds (the heartbeat says 4 x 250 ms), not at the timeout, on the
// shared-memory path and on TCP (small ops on the sync pairs, large ones on
// the event loop's), and the error names the silent rank.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/launcher/child_process.h"
#include "gtest/gtest.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

using std::chrono::seconds;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void stop_one_of_three(const std::string& name, bool shared_memory, int64_t bytes) {
  TCPStoreOptions so;
  so.port = 0;
  so.is_master = true;
  auto server = TCPStore::create("127.0.0.1", so);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name + "_";
  std::vector<launcher::ChildProcess> members;
  for (int i = 0; i < 3; ++i) {
    launcher::SpawnOptions o;
    o.argv = {"tests/elastic/abort_member", "--port=" + std::to_string((*server)->port()),
              "--bytes=" + std::to_string(bytes)};
    o.env = {{"DDPX_SHM", shared_memory ? "1" : "0"}};
    o.output = launcher::SpawnOptions::Output::kFile;
    o.output_path = dir + std::to_string(i);
    o.stderr_with_stdout = true;
    o.die_with_parent = true;
    auto child = launcher::ChildProcess::spawn(o);
    ASSERT_TRUE(child.ok()) << child.status();
    members.push_back(*std::move(child));
  }
  // The two that are not stopped end on their own; the stopped one never does.
  std::string all;
  std::vector<std::optional<launcher::ExitStatus>> ends(members.size());
  int ended = 0;
  const auto until = std::chrono::steady_clock::now() + seconds(50);
  while (ended < 2 && std::chrono::steady_clock::now() < until) {
    ended = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!ends[i].has_value()) ends[i] = members[i].try_wait();
      ended += ends[i].has_value();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int i = 0; i < 3; ++i) all += read_file(dir + std::to_string(i));
  members.clear();  // SIGKILLs and reaps the stopped one
  ASSERT_EQ(ended, 2) << "the survivors did not end:\n" << all;
  // Exit status 0: the op failed (as it must) and nothing else went wrong
  // (a sanitizer's report makes it non-zero).
  for (const auto& e : ends) {
    if (e.has_value()) {
      EXPECT_EQ(e->exit_code, 0) << e->describe() << "\n" << all;
    }
  }
  std::regex line("rank (\\d): failed after ([0-9.]+) s: (.*)");
  int failed = 0, named = 0;
  for (auto it = std::sregex_iterator(all.begin(), all.end(), line);
       it != std::sregex_iterator(); ++it) {
    ++failed;
    // 1 s of silence makes the verdict; the op timeout is 60 s.
    EXPECT_LT(std::stod((*it)[2]), 15.0) << all;
    const std::string why = (*it)[3];
    if (why.find("rank 2 (member") != std::string::npos &&
        why.find("sent no heartbeat") != std::string::npos) {
      ++named;
    }
  }
  EXPECT_EQ(failed, 2) << all;
  // The first to reach the verdict names the silent rank. On shared memory
  // its peers give up naming the rank it waited for, rank 2; on TCP a peer
  // may first see the aborting rank shut its connections.
  EXPECT_GE(named, shared_memory ? 2 : 1) << all;
  EXPECT_NE(all.find("rank 2: stopping"), std::string::npos) << all;
}

TEST(AbortInFlightTest, SharedMemorySmallAllreduce) { stop_one_of_three("shm_small", true, 64); }
TEST(AbortInFlightTest, SharedMemoryLargeAllreduce) {
  stop_one_of_three("shm_large", true, 8 << 20);
}
TEST(AbortInFlightTest, TcpSmallAllreduce) { stop_one_of_three("tcp_small", false, 64); }
TEST(AbortInFlightTest, TcpLargeAllreduce) { stop_one_of_three("tcp_large", false, 8 << 20); }

}  // namespace
}  // namespace ddpx
