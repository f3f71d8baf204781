// Ranks started by hand: tcp:// and file:// with --rank/--world_size or
// RANK/WORLD_SIZE (2 and 4 ranks); a missing rank, a differing world size or
// job, a rank 0 that cannot bind its port, and two jobs on one port are each
// refused with a message naming both values, and never merge.
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

const std::string kTrain = std::string(kTrainBinary) +
                           " --hidden=16 --batch_size=8 --train_limit=64 --epochs=2 --max_steps=3"
                           " --log_every=1000 --timeout_s=20";

void expect_trains(const std::string& output, int world) {
  for (int r = 0; r < world; ++r)
    EXPECT_NE(output.find("rank " + std::to_string(r) + " exit 0"), std::string::npos) << output;
  EXPECT_NE(output.find("done: 3 steps"), std::string::npos) << output;
  EXPECT_NE(output.find(std::to_string(world) + " ranks x batch 8"), std::string::npos) << output;
}

TEST(TrainLaunchTest, TcpWithRankFlagsTwoRanks) {
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  expect_trains(run_ranks(fresh_dir("tcp2"), 2, [&](int r) {
                  return kTrain + " " + init + " --rank=" + std::to_string(r) +
                         " --world_size=2 --job_id=tcp2";
                }),
                2);
}

TEST(TrainLaunchTest, TcpWithRankEnvironmentFourRanks) {
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  expect_trains(run_ranks(fresh_dir("tcp4"), 4, [&](int r) {
                  return "RANK=" + std::to_string(r) + " WORLD_SIZE=4 " + kTrain + " " + init +
                         " --job_id=tcp4";
                }),
                4);
}

TEST(TrainLaunchTest, FileWithRankEnvironmentTwoRanksTwiceOnOnePath) {
  const std::string dir = fresh_dir("file2");
  // The second job reuses the path: the first removed its store at the end.
  for (int run = 0; run < 2; ++run) {
    expect_trains(run_ranks(dir, 2, [&](int r) {
                    return "RANK=" + std::to_string(r) + " WORLD_SIZE=2 " + kTrain +
                           " --init=file://" + dir + "/store";
                  }),
                  2);
  }
}

TEST(TrainLaunchTest, FileWithRankFlagsFourRanks) {
  const std::string dir = fresh_dir("file4");
  expect_trains(run_ranks(dir, 4, [&](int r) {
                  return kTrain + " --init=file://" + dir + "/store --rank=" + std::to_string(r) +
                         " --world_size=4";
                }),
                4);
}

TEST(TrainLaunchTest, TcpWithoutRankOrWorldSizeSaysWhatIsMissing) {
  RunResult r = run_command("env -u RANK -u WORLD_SIZE " + kTrain + " --init=tcp://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("pass --rank and --world_size (or set RANK and WORLD_SIZE); missing: "
                          "rank and world size"),
            std::string::npos)
      << r.output;
  r = run_command(kTrain + " --init=file:///tmp/x --rank=0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing: world size"), std::string::npos) << r.output;
}

TEST(TrainLaunchTest, DifferingWorldSizeFailsNamingBoth) {
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string out = run_ranks(fresh_dir("worlds"), 2, [&](int r) {
    return kTrain + " " + init + " --job_id=w --rank=" + std::to_string(r) +
           (r == 0 ? " --world_size=2" : " --world_size=4");
  });
  // Both fail at once (well within the 20 s timeout), each naming both.
  EXPECT_NE(out.find("world size mismatch: rank 1 was started with world size 4, rank 0 of job "
                     "'w' with world size 2"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("world size mismatch: rank 0 was started with world size 2, rank 1 of job "
                     "'w' with world size 4"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank 0 exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 exit 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("address.cc"), std::string::npos) << out;
}

// Issue 19 point 10: job A's rank 0 serves the port; job B's rank 0 cannot
// bind it and fails; job B's rank 1 reaches A's store and is refused by job
// id; job A's rank 1 then joins A, which trains as 2 ranks.
TEST(TrainLaunchTest, TwoJobsOnOnePortNeverMerge) {
  const std::string dir = fresh_dir("two_jobs");
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  auto rank = [&](const char* job, int r) {
    return kTrain + " " + init + " --world_size=2 --job_id=" + job + " --rank=" +
           std::to_string(r);
  };
  const std::string log = dir + "/";
  // A's rank 0 is listening once a connection to the port succeeds (bash's
  // /dev/tcp; the probe's own connection is one the store just drops).
  const std::string script =
      "(" + rank("A", 0) + ") > " + log + "a0.log 2>&1 & a0=$!; " +
      "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/" + init.substr(init.rfind(':') + 1) +
      ") 2>/dev/null && break; sleep 0.05; done; " +
      rank("B", 0) + " > " + log + "b0.log 2>&1; echo \"b0 exit $?\"; " +
      rank("B", 1) + " > " + log + "b1.log 2>&1; echo \"b1 exit $?\"; " +
      rank("A", 1) + " > " + log + "a1.log 2>&1; echo \"a1 exit $?\"; wait $a0; "
      "echo \"a0 exit $?\"; cat " + log + "b0.log " + log + "b1.log " + log + "a0.log";
  const std::string out = run_command("bash -c '" + script + "'").output;
  EXPECT_NE(out.find("b0 exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("as rank 0 of 2"), std::string::npos) << out;
  EXPECT_NE(out.find("Address already in use"), std::string::npos) << out;
  EXPECT_NE(out.find("b1 exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("job id mismatch: rank 1 belongs to job 'B', but rank 0 at this rendezvous "
                     "belongs to job 'A'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("a1 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("a0 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 3 steps"), std::string::npos) << out;
}

TEST(TrainLaunchTest, ARankStartedTwiceIsRefused) {
  const std::string dir = fresh_dir("dup");
  const std::string out = run_ranks(dir, 3, [&](int r) {
    return kTrain + " --init=file://" + dir + "/store --job_id=d --world_size=2 --timeout_s=5" +
           (r == 2 ? " --rank=1; sleep 0" : " --rank=" + std::to_string(r));
  });
  EXPECT_NE(out.find("rank 1 of job 'd' has already joined this rendezvous store"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace ddpx::integration_test
