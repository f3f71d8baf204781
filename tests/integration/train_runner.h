// Runs examples/train from a test and reads what it reported.
#ifndef DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_
#define DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_

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

// One JSON line of --metrics_out, numbers and strings as text.
using MetricsLine = std::map<std::string, std::string>;
std::vector<MetricsLine> read_metrics(const std::string& path);
// The lines whose "type" is `type` ("step" or "epoch").
std::vector<MetricsLine> lines_of_type(const std::vector<MetricsLine>& lines,
                                       const std::string& type);
double number(const MetricsLine& line, const std::string& key);

std::string read_file(const std::string& path);

}  // namespace ddpx::integration_test

#endif  // DDPX_TESTS_INTEGRATION_TRAIN_RUNNER_H_
