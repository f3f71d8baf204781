// The local launcher with real child processes (tests/examples/fake_rank).
#include "examples/launcher/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace ddpx::launcher {
namespace {

using std::chrono::steady_clock;

const char kFakeRank[] = "tests/examples/fake_rank";

std::string fresh_dir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

LaunchOptions options(int nproc, std::vector<std::string> args) {
  LaunchOptions o;
  o.nproc = nproc;
  o.program = kFakeRank;
  o.args = std::move(args);
  o.grace = std::chrono::milliseconds(2000);
  return o;
}

TEST(LauncherTest, EveryRankGetsItsRendezvousEnvironment) {
  const std::string dir = fresh_dir("env");
  LaunchResult r = launch_local_ranks(options(3, {dir, "ok"}));
  ASSERT_EQ(r.exit_code, 0) << r.message;
  std::set<std::string> ports;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string env = read_file(dir + "/rank" + std::to_string(rank) + ".env");
    const std::string r_s = std::to_string(rank);
    EXPECT_EQ(env.find("RANK=" + r_s + "\nWORLD_SIZE=3\nLOCAL_RANK=" + r_s +
                       "\nLOCAL_WORLD_SIZE=3\nMASTER_ADDR=127.0.0.1\n"),
              0u) << env;
    const size_t at = env.find("MASTER_PORT=");
    ASSERT_NE(at, std::string::npos);
    ports.insert(env.substr(at));
  }
  ASSERT_EQ(ports.size(), 1u);  // one port for everybody
  EXPECT_GT(std::stoi(ports.begin()->substr(12)), 0);
}

TEST(LauncherTest, FailingRankStopsTheJobAndIsNamed) {
  const std::string dir = fresh_dir("fail");
  const auto start = steady_clock::now();
  LaunchResult r = launch_local_ranks(options(3, {dir, "fail", "1", "3"}));
  const double seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_NE(r.message.find("rank 1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("exited with status 3"), std::string::npos) << r.message;
  // The other ranks sleep 60 s; fail-fast means we did not wait for them.
  EXPECT_LT(seconds, 20.0);
}

TEST(LauncherTest, RankKilledBySignalIsNamedWithTheSignal) {
  const std::string dir = fresh_dir("crash");
  LaunchResult r = launch_local_ranks(options(2, {dir, "crash", "0"}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_NE(r.message.find("rank 0"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("killed by signal 9"), std::string::npos) << r.message;
}

TEST(LauncherTest, MissingProgramIsAClearError) {
  LaunchOptions o = options(2, {});
  o.program = "/nonexistent/trainer";
  LaunchResult r = launch_local_ranks(o);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.message.find("/nonexistent/trainer"), std::string::npos) << r.message;
  o.program = kFakeRank;
  o.nproc = 0;
  r = launch_local_ranks(o);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.message.find("--nproc"), std::string::npos) << r.message;
}

TEST(LauncherTest, SigtermToLauncherIsForwardedToEveryRank) {
  const std::string dir = fresh_dir("forward");
  // The launch CLI in its own process, so the signal goes to it alone.
  const pid_t launcher = fork();
  if (launcher == 0) {
    execl("examples/launcher/launch", "launch", "--nproc=2", "--", kFakeRank,
          dir.c_str(), "wait", nullptr);
    _exit(127);
  }
  ASSERT_GT(launcher, 0);
  const auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (!(exists(dir + "/rank0.ready") && exists(dir + "/rank1.ready")) &&
         steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(exists(dir + "/rank1.ready"));
  kill(launcher, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  EXPECT_EQ(read_file(dir + "/rank0.signal"), "15");
  EXPECT_EQ(read_file(dir + "/rank1.signal"), "15");
  // The ranks exited 0 on the signal, but the job was interrupted: non-zero.
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
}

TEST(LauncherTest, PickFreePortGivesABindablePort) {
  const int port = pick_free_port();
  EXPECT_GT(port, 1023);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace ddpx::launcher
