// Runs examples/train from a test and reads what it reported.
#ifndef DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_
#define DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ddpx::integration_test {

// The trainer binary inside the test's runfiles.
inline constexpr char kTrainBinary[] = "examples/train";

struct RunResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh, capturing its output.
RunResult run_command(const std::string& command);

// A fresh empty folder under TEST_TMPDIR.
std::string fresh_dir(const std::string& name);

// Ranks started by hand: `world` commands in the background, rank r's
// being `rank_command(r)` with its output in `dir`/r<r>.log; waits for all
// and returns "rank <r> exit <code>" per rank followed by their logs.
std::string run_ranks(const std::string& dir, int world,
                      const std::function<std::string(int)>& rank_command);

// A loopback TCP port that was free a moment ago (for --init=tcp://).
int free_port();

// Starts `command` through /bin/sh in its own process group, output to
// `log_path`, with DDPX_CHECKPOINT_STOP_AT=`stop_at`
// (examples/trainer/checkpoint_fault.h), and waits (up to 60 s) until the
// stopped rank has created `marker`. Returns the group's id, with the job
// stopped there; -1 (job reaped) when it ended without stopping.
pid_t start_stopped_at(const std::string& command, const std::string& stop_at,
                       const std::string& marker, const std::string& log_path);

// SIGKILLs the whole process group `pgid` (shell, launcher, ranks) and waits
// until none of it is left.
void kill_job(pid_t pgid);

// One JSON line of --metrics_out, numbers and strings as text.
using MetricsLine = std::map<std::string, std::string>;
std::vector<MetricsLine> read_metrics(const std::string& path);
// The lines whose "type" is `type` ("step" or "epoch").
std::vector<MetricsLine> lines_of_type(const std::vector<MetricsLine>& lines,
                                       const std::string& type);
double number(const MetricsLine& line, const std::string& key);

std::string read_file(const std::string& path);

// Trains `command` (a trainer command line without --max_steps,
// --checkpoint_dir or --metrics_out) to step `end` in one run, checkpoints
// in `dir`/whole and metrics in `dir`/whole.jsonl, and in two runs sharing
// `dir`/split and `dir`/split.jsonl: stopped at step `stop`, then resumed to
// `end`. Expects every run to succeed, the second to say it resumed, and
// both to report the same steps with the same losses, `end` of each.
// Fatal failures (see ASSERT_NO_FATAL_FAILURE) when a run fails or a step
// is missing.
void expect_resume_matches_whole_run(const std::string& command, const std::string& dir,
                                     int stop, int end);

}  // namespace ddpx::integration_test

#endif  // DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_
