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

// One fault case: who misbehaves how, and what trace_analyze must say.
struct FaultCase {
  const char* name;
  const char* fault;  // --inject_fault
  int rank;           // the rank that misbehaves
  const char* kind;   // the verdict's kind
  int seq;            // the verdict's sequence number
  const char* op;     // the verdict's op
  // Over TCP (no shared memory), the ranks' allreduces of different sizes
  // wait on different Gloo slots and time out; each names the neighbour
  // its ring waited for (not the culprit), and the dumps show who called
  // what.
  bool tcp_only = false;
};

const FaultCase kCases[] = {
    {"RankSkipsOneAllreduce", "skip_allreduce", 2, "mismatch", 5, "allreduce"},
    {"RankKilledWithSigkill", "sigkill", 2, "dead", 5, "allreduce"},
    {"RankAllreducesAnotherCount", "wrong_count", 2, "mismatch", 5, "allreduce"},
    {"RankBroadcastsFromAnotherRoot", "wrong_root", 2, "mismatch", kIters, "broadcast"},
    {"StoreHostRankZeroKilled", "sigkill", 0, "dead", 5, "allreduce"},
    {"RankAllreducesAnotherCountOverTcp", "wrong_count", 2, "mismatch", 5, "allreduce", true},
};

class PgOnlyHang : public ::testing::TestWithParam<FaultCase> {};

TEST_P(PgOnlyHang, LiveRanksFailNamingTheCulpritAndTraceAnalyzeAgrees) {
  const FaultCase& c = GetParam();
  Scenario s = pg_only(c.fault, c.rank);
  if (c.tcp_only) s.env = {{"DDPX_SHM", "0"}};
  expect_scenario(s, run_scenario(s),
                  absl::StrCat("VERDICT kind=", c.kind, " ranks=", c.rank,
                               " group=default_pg seq=", c.seq, " op=", c.op),
                  /*names_culprit=*/!c.tcp_only);
}

INSTANTIATE_TEST_SUITE_P(Faults, PgOnlyHang, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return std::string(info.param.name);
                         });

// Also: each live rank's error says how long it waited for whom, and
// trace_analyze draws the timeline.
TEST(PgOnlyHangSigstop, RankStoppedWithSigstop) {
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

}  // namespace
}  // namespace ddpx::testing
