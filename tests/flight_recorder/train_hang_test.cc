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
            "--log_every=1000", "--blas_threads=1"};
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

TEST(TrainHang, RankSkipsOneAllreduce) {
  Scenario s = train("skip_allreduce");
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "mismatch", 2, "allreduce", 0));
}

TEST(TrainHang, RankStoppedWithSigstopMidEpoch) {
  Scenario s = train("sigstop");
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "straggler", 2, "allreduce", 0));
}

TEST(TrainHang, RankKilledWithSigkill) {
  Scenario s = train("sigkill");
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "dead", 2, "allreduce", 0));
}

TEST(TrainHang, RankAllreducesAnotherCount) {
  Scenario s = train("wrong_count");
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "mismatch", 2, "allreduce", 0));
}

TEST(TrainHang, RankBroadcastsFromAnotherRoot) {
  Scenario s = train("wrong_root");
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "mismatch", 2, "broadcast", 0));
}

TEST(TrainHang, StoreHostRankZeroKilled) {
  Scenario s = train("sigkill", 0);
  ScenarioResult r = run_scenario(s);
  expect_scenario(s, r, verdict(r, "dead", 0, "allreduce", 1));
}

}  // namespace
}  // namespace ddpx::testing
