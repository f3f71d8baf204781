// Runs a 4-rank job whose rank `fault_rank` misbehaves on purpose (the
// programs' --inject_fault), watches when each rank exits, and runs
// tools/trace_analyze on the dumps they leave.
#ifndef DDPX_TESTS_FLIGHT_RECORDER_HANG_HARNESS_H_
#define DDPX_TESTS_FLIGHT_RECORDER_HANG_HARNESS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "examples/launcher/child_process.h"
#include "tests/sanitizers.h"

namespace ddpx::testing {

// Sanitized builds run several times slower: longer op timeouts there
// (also for the rendezvous, which every --timeout_s bounds).
inline constexpr int kOpTimeoutS = kSanitized ? 10 : 3;

struct Scenario {
  std::string program;  // runfile path: "examples/pg_only", "examples/train"
  std::vector<std::string> args;
  std::string fault;  // --inject_fault
  int fault_rank = 2;
  int fault_at = 5;
  int world = 4;
  int timeout_s = kOpTimeoutS;
  bool png = false;  // let trace_analyze draw the PNG too
  std::vector<std::pair<std::string, std::string>> env;  // for every rank
};

struct RankOutcome {
  launcher::ExitStatus status;
  bool exited_by_itself = false;  // not killed by the harness at the end
  double seconds_after_fault = -1;
  std::string output;
};

struct ScenarioResult {
  std::string dir;  // the trace dir (and the ranks' logs)
  bool fault_seen = false;
  std::vector<RankOutcome> ranks;
  std::string analysis;  // trace_analyze's output
  std::string verdict;   // its last line
};

ScenarioResult run_scenario(const Scenario& scenario);

// The "<op> #<seq> of group default_pg" an error names, or "".
std::string op_named(const std::string& output);
// Whether `output` names rank `rank` (as a peer: not "rank R of N").
bool names_rank(const std::string& output, int rank);
bool file_exists(const std::string& path);
// The sequence number of the first op in `dump_path` recorded under call
// site `site` at step `step`, or -1.
int64_t seq_at_step(const std::string& dump_path, const std::string& site, int64_t step);

// The checks every scenario shares: every rank that was not stopped or
// killed exits non-zero by itself within the timeout plus 10 s of the
// fault, with an error naming an op and its sequence number (and, unless
// `names_culprit` is false, the faulty rank), and leaves a dump; the
// verdict is `verdict`.
void expect_scenario(const Scenario& scenario, const ScenarioResult& result,
                     const std::string& verdict, bool names_culprit = true);

}  // namespace ddpx::testing

#endif  // DDPX_TESTS_FLIGHT_RECORDER_HANG_HARNESS_H_
