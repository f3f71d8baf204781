// Ranks started by hand: tcp:// and file:// with --rank/--world_size or
// RANK/WORLD_SIZE (2 and 4 ranks); a missing rank, a differing world size,
// job or setting, a rank 0 that cannot bind its port, and two jobs on one
// port are each refused with a message naming both values, and never merge;
// a rank started twice stops both claimants.
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

// Issue 33 point 2: ranks started by hand on one port without --job_id,
// job A's rank 0, then job B's rank 1 (another seed and learning rate), then
// job A's rank 1. B1 is refused before it claims rank 1, naming the first
// setting that differs with both values; A1 then joins and job A trains to
// the end.
TEST(TrainLaunchTest, ARankWithOtherSettingsIsRefusedAndItsJobStillTrains) {
  const std::string dir = fresh_dir("settings");
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  auto rank = [&](int r, const std::string& flags) {
    return kTrain + " " + init + " --world_size=2 --rank=" + std::to_string(r) + flags;
  };
  const std::string log = dir + "/";
  const std::string script =
      "(" + rank(0, " --seed=0 --lr=0.05") + ") > " + log + "a0.log 2>&1 & a0=$!; " +
      rank(1, " --seed=1 --lr=0.1") + " > " + log + "b1.log 2>&1; echo \"b1 exit $?\"; " +
      rank(1, " --seed=0 --lr=0.05") + " > " + log + "a1.log 2>&1; echo \"a1 exit $?\"; " +
      "wait $a0; echo \"a0 exit $?\"; cat " + log + "b1.log " + log + "a0.log";
  const std::string out = run_command("bash -c '" + script + "'").output;
  EXPECT_NE(out.find("b1 exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("setting 'seed' differs: rank 0 has 0, this rank (1) has 1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("a1 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("a0 exit 0"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 3 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("2 ranks x batch 8"), std::string::npos) << out;
}

// Issue 33 point 2: two processes started as rank 1 of a 3-rank job (rank
// 2 is never started, so the job cannot have formed before the second
// claim): the second claimant is refused at once, and rank 0 stops the
// whole job, the first claimant included, well before the timeout.
TEST(TrainLaunchTest, ARankStartedTwiceFailsBothClaimants) {
  const std::string dir = fresh_dir("dup");
  const std::string init = "--init=tcp://127.0.0.1:" + std::to_string(free_port());
  auto rank = [&](int r) {
    return kTrain + " " + init + " --job_id=d --world_size=3 --timeout_s=120 --rank=" +
           std::to_string(r);
  };
  const std::string log = dir + "/";
  const std::string script =
      "start=$(date +%s); (" + rank(0) + ") > " + log + "r0.log 2>&1 & r0=$!; (" + rank(1) +
      ") > " + log + "first.log 2>&1 & first=$!; " + rank(1) + " > " + log +
      "second.log 2>&1; echo \"second exit $?\"; wait $first; echo \"first exit $?\"; "
      "wait $r0; echo \"r0 exit $?\"; echo \"took $(( $(date +%s) - start )) s\"; cat " + log +
      "second.log " + log + "first.log " + log + "r0.log";
  const std::string out = run_command("bash -c '" + script + "'").output;
  EXPECT_NE(out.find("second exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("first exit 1"), std::string::npos) << out;
  EXPECT_NE(out.find("r0 exit 1"), std::string::npos) << out;
  // Which of the two claimed first is up to the scheduler; one line says
  // the rank was taken, the other (and rank 0) that the job stops.
  EXPECT_NE(out.find("rank 1 of job 'd' has already joined this rendezvous store"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank 0 stopped job 'd' at rendezvous: rank 1 of job 'd' was claimed by a "
                     "second process"),
            std::string::npos)
      << out;
  const size_t took = out.find("took ");
  ASSERT_NE(took, std::string::npos) << out;
  EXPECT_LT(std::stoi(out.substr(took + 5)), 60) << out;  // not the 120 s timeout
}

}  // namespace
}  // namespace ddpx::integration_test
