// The process helpers the multi-process tests stand on: ChildProcess
// (//examples/launcher:child_process) and run_ranks built on it, with real
// /bin/sh children.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "examples/launcher/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process_group/rank_processes.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;
using launcher::ChildProcess;
using launcher::ExitStatus;
using launcher::SpawnOptions;
using std::chrono::milliseconds;
using testing_util::EnvVars;
using testing_util::RankRun;

std::vector<RankRun> run_shell(int nproc, const std::string& script,
                               std::function<EnvVars(int)> env_for, int deadline_s = 20) {
  return testing_util::run_ranks(
      "/bin/sh", nproc, [&](int) { return std::vector<std::string>{"-c", script}; },
      env_for, std::chrono::seconds(deadline_s));
}

TEST(RunRanks, EachRankGetsItsEnvironmentAndItsOwnOutput) {
  std::vector<RankRun> runs = run_shell(3, "echo out $RANK; echo err $RANK >&2; exit $RANK",
                                        [](int r) { return EnvVars{{"RANK", std::to_string(r)}}; });
  ASSERT_EQ(runs.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(runs[r].exit_code, r);
    EXPECT_EQ(runs[r].signal, 0);
    EXPECT_EQ(runs[r].output, "out " + std::to_string(r) + "\nerr " + std::to_string(r) + "\n");
  }
  EXPECT_TRUE(runs[0].ok());
  EXPECT_FALSE(runs[1].ok());
}

TEST(RunRanks, TheRankEnvironmentReplacesAnInheritedVariable) {
  setenv("DDPX_HELPER_PROBE", "inherited", 1);
  std::vector<RankRun> runs = run_shell(1, "echo $DDPX_HELPER_PROBE; echo $DDPX_OTHER", [](int) {
    return EnvVars{{"DDPX_HELPER_PROBE", "replaced"}, {"DDPX_OTHER", "a"}, {"DDPX_OTHER", "b"}};
  });
  unsetenv("DDPX_HELPER_PROBE");
  // The last of two settings wins, as with setenv.
  EXPECT_EQ(runs[0].output, "replaced\nb\n");
}

TEST(RunRanks, StragglersAreKilledAtTheDeadline) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankRun> runs =
      run_shell(2, "if [ $RANK = 1 ]; then exec sleep 60; fi; echo done",
                [](int r) { return EnvVars{{"RANK", std::to_string(r)}}; }, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_TRUE(runs[0].ok()) << runs[0].output;
  EXPECT_EQ(runs[1].exit_code, -1);
  EXPECT_EQ(runs[1].signal, SIGKILL);
}

TEST(RunRanks, AMissingProgramIsReportedNotHung) {
  std::vector<RankRun> runs = testing_util::run_ranks(
      "/nonexistent/worker", 2, [](int) { return std::vector<std::string>{}; },
      [](int) { return EnvVars{}; }, std::chrono::seconds(5));
  for (const RankRun& run : runs) {
    EXPECT_EQ(run.exit_code, 127);
    EXPECT_THAT(run.output, HasSubstr("cannot exec /nonexistent/worker: No such file"));
  }
}

TEST(ChildProcess, WaitForTimesOutThenKillGivesTheSignal) {
  SpawnOptions o;
  o.argv = {"sleep", "60"};  // a bare name: looked up on PATH
  absl::StatusOr<ChildProcess> child = ChildProcess::spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<ExitStatus> early = child->wait_for(milliseconds(50));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(early.status().message(), HasSubstr("pid " + std::to_string(child->pid())));
  child->kill(SIGTERM);
  absl::StatusOr<ExitStatus> done = child->wait_for(milliseconds(10000));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->signal, SIGTERM);
  EXPECT_EQ(done->shell_code(), 128 + SIGTERM);
  EXPECT_THAT(done->describe(), HasSubstr("was killed by signal 15"));
}

TEST(ChildProcess, PipedStdoutIsReadableAndEndsAtExit) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "printf 'a\\nb\\n'; exit 7"};
  o.output = SpawnOptions::Output::kPipe;
  absl::StatusOr<ChildProcess> child = ChildProcess::spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  char buf[64];
  for (ssize_t n; (n = read(child->stdout_fd(), buf, sizeof(buf))) > 0;) out.append(buf, n);
  EXPECT_EQ(out, "a\nb\n");
  absl::StatusOr<ExitStatus> done = child->wait_for(milliseconds(10000));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->exit_code, 7);
  EXPECT_EQ(done->describe(), "exited with status 7");
}

TEST(ChildProcess, SpawnErrorsNameTheProblem) {
  SpawnOptions o;
  o.argv = {"ddpx-no-such-program"};
  EXPECT_THAT(ChildProcess::spawn(o).status().message(),
              HasSubstr("cannot exec ddpx-no-such-program: no executable of that name on PATH"));
  o.argv = {"/bin/true"};
  o.output = SpawnOptions::Output::kFile;
  o.output_path = "/nonexistent-dir/log";
  EXPECT_THAT(ChildProcess::spawn(o).status().message(),
              HasSubstr("cannot create /nonexistent-dir/log"));
  o.argv = {};
  EXPECT_THAT(ChildProcess::spawn(o).status().message(), HasSubstr("empty argv"));
}

TEST(ChildProcess, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid;
  {
    SpawnOptions o;
    o.argv = {"sleep", "60"};
    absl::StatusOr<ChildProcess> child = ChildProcess::spawn(o);
    ASSERT_TRUE(child.ok()) << child.status();
    pid = child->pid();
  }
  // Reaped: the pid is no longer our child (and not a zombie).
  EXPECT_EQ(kill(pid, 0), -1);
}

}  // namespace
}  // namespace ddpx
