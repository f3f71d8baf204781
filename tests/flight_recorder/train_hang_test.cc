// 4 ranks of the MLP trainer (examples/train), one of which misbehaves at
// step 5 (--inject_fault): every other rank must fail within the timeout
// plus 10 s naming the op, its sequence number and the rank, leave a dump,
// and tools/trace_analyze must name the right kind, rank and sequence
// number: that of the step's bucket collective in the dumps.
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/flight_recorder/hang_harness.h"

namespace ddpx::testing {
namespace {

constexpr int kStep = 5;

Scenario train(const std::string& fault, int rank = 2) {
  Scenario s;
  s.program = "examples/train";
  s.args = {"--hidden=64", "--batch_size=16", "--max_steps=12", "--train_limit=4096",
            "--log_every=1000", "--threads=1"};
  s.fault = fault;
  s.fault_rank = rank;
  s.fault_at = kStep;
  return s;
}

// The sequence number of step kStep's bucket collective (from a live rank's
// dump), and the verdict that names it.
std::string verdict(const ScenarioResult& r, const std::string& kind, int rank,
                    const std::string& op, int dump_of) {
  const int64_t seq =
      seq_at_step(absl::StrCat(r.dir, "/rank", dump_of, ".jsonl"), "ddp:allreduce", kStep);
  return absl::StrCat("VERDICT kind=", kind, " ranks=", rank, " group=default_pg seq=", seq,
                      " op=", op);
}

// One fault case: who misbehaves how, and what trace_analyze must say.
struct FaultCase {
  const char* name;
  const char* fault;  // --inject_fault
  int rank;           // the rank that misbehaves
  const char* kind;   // the verdict's kind
  const char* op;     // the verdict's op
  int dump_of;        // a live rank, whose dump gives the sequence number
};

const FaultCase kCases[] = {
    {"RankSkipsOneAllreduce", "skip_allreduce", 2, "mismatch", "allreduce", 0},
    {"RankStoppedWithSigstopMidEpoch", "sigstop", 2, "straggler", "allreduce", 0},
    {"RankKilledWithSigkill", "sigkill", 2, "dead", "allreduce", 0},
    {"RankAllreducesAnotherCount", "wrong_count", 2, "mismatch", "allreduce", 0},
    {"RankBroadcastsFromAnotherRoot", "wrong_root", 2, "mismatch", "broadcast", 0},
    {"StoreHostRankZeroKilled", "sigkill", 0, "dead", "allreduce", 1},
};

class TrainHang : public ::testing::TestWithParam<FaultCase> {};

TEST_P(TrainHang, LiveRanksFailNamingTheCulpritAndTraceAnalyzeAgrees) {
  const FaultCase& c = GetParam();
  Scenario s = train(c.fault, c.rank);
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, c.kind, c.rank, c.op, c.dump_of));
}

INSTANTIATE_TEST_SUITE_P(Faults, TrainHang, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace ddpx::testing
