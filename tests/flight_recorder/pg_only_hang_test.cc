// 4 ranks of examples/pg_only, one of which misbehaves (--inject_fault):
// every other rank must fail within the timeout plus 10 s naming the op,
// its sequence number and the rank, leave a dump, and tools/trace_analyze
// must name the right kind, rank and sequence number.
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/flight_recorder/hang_harness.h"

namespace ddpx::testing {
namespace {

constexpr int kIters = 12;

Scenario pg_only(const std::string& fault, int rank = 2) {
  Scenario s;
  s.program = "examples/pg_only";
  s.args = {"--numel=1024", absl::StrCat("--iters=", kIters)};
  s.fault = fault;
  s.fault_rank = rank;
  s.fault_at = 5;
  return s;
}

TEST(PgOnlyHang, RankSkipsOneAllreduce) {
  Scenario s = pg_only("skip_allreduce");
  expect_scenario(s, run_scenario(s),
                  "VERDICT kind=mismatch ranks=2 group=default_pg seq=5 op=allreduce");
}

TEST(PgOnlyHang, RankStoppedWithSigstop) {
  Scenario s = pg_only("sigstop");
  s.png = true;
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, "VERDICT kind=straggler ranks=2 group=default_pg seq=5 op=allreduce");
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(r.ranks[rank].output.find(
                  absl::StrCat("timed out after ", kOpTimeoutS, " s: no data from rank 2")),
              std::string::npos)
        << r.ranks[rank].output;
  }
  EXPECT_TRUE(file_exists(r.dir + "/timeline.json"));
  EXPECT_TRUE(file_exists(r.dir + "/timeline.png")) << r.analysis;
}

TEST(PgOnlyHang, RankKilledWithSigkill) {
  Scenario s = pg_only("sigkill");
  expect_scenario(s, run_scenario(s),
                  "VERDICT kind=dead ranks=2 group=default_pg seq=5 op=allreduce");
}

TEST(PgOnlyHang, RankAllreducesAnotherCount) {
  Scenario s = pg_only("wrong_count");
  expect_scenario(s, run_scenario(s),
                  "VERDICT kind=mismatch ranks=2 group=default_pg seq=5 op=allreduce");
}

TEST(PgOnlyHang, RankBroadcastsFromAnotherRoot) {
  Scenario s = pg_only("wrong_root");
  expect_scenario(s, run_scenario(s),
                  absl::StrCat("VERDICT kind=mismatch ranks=2 group=default_pg seq=", kIters,
                               " op=broadcast"));
}

TEST(PgOnlyHang, StoreHostRankZeroKilled) {
  Scenario s = pg_only("sigkill", 0);
  expect_scenario(s, run_scenario(s),
                  "VERDICT kind=dead ranks=0 group=default_pg seq=5 op=allreduce");
}

// Over TCP (no shared memory): the ranks' allreduces of different sizes
// wait on different Gloo slots and time out; each names the neighbour its
// ring waited for, and the dumps show who called what.
TEST(PgOnlyHang, RankAllreducesAnotherCountOverTcp) {
  Scenario s = pg_only("wrong_count");
  s.env = {{"DDPX_SHM", "0"}};
  expect_scenario(s, run_scenario(s),
                  "VERDICT kind=mismatch ranks=2 group=default_pg seq=5 op=allreduce",
                  /*names_culprit=*/false);
}

}  // namespace
}  // namespace ddpx::testing
