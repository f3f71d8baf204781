#include "tests/process_group/rank_processes.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "examples/launcher/child_process.h"
#include "examples/launcher/launcher.h"
#include "tests/store/subprocess.h"

namespace ddpx {
namespace testing_util {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string scratch_path(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  return dir + "/" + name + "." + std::to_string(getpid()) + "." +
         std::to_string(counter++);
}

std::string runfile(const std::string& path) { return store_test::runfile(path); }

int free_port() { return launcher::pick_free_port(); }

std::vector<RankRun> run_ranks(const std::string& program, int nproc,
                               const std::function<std::vector<std::string>(int)>& args_for,
                               const std::function<EnvVars(int)>& env_for,
                               std::chrono::seconds deadline) {
  const auto kill_at = std::chrono::steady_clock::now() + deadline;
  std::vector<RankRun> runs(nproc);
  std::vector<std::string> logs(nproc);
  std::vector<launcher::ChildProcess> children;
  std::vector<int> rank_of_child;
  for (int rank = 0; rank < nproc; ++rank) {
    launcher::SpawnOptions options;
    options.argv = {program};
    for (std::string& a : args_for(rank)) options.argv.push_back(std::move(a));
    options.env = env_for(rank);
    options.output = launcher::SpawnOptions::Output::kFile;
    options.stderr_with_stdout = true;
    options.output_path = logs[rank] = scratch_path("rank" + std::to_string(rank) + ".log");
    absl::StatusOr<launcher::ChildProcess> child = launcher::ChildProcess::spawn(options);
    if (!child.ok()) {
      runs[rank].exit_code = 127;
      runs[rank].output = std::string(child.status().message());
      logs[rank].clear();
      continue;
    }
    children.push_back(*std::move(child));
    rank_of_child.push_back(rank);
  }
  launcher::reap_all(children, kill_at);
  for (size_t i = 0; i < children.size(); ++i) {
    launcher::ExitStatus status = *children[i].try_wait();
    RankRun& run = runs[rank_of_child[i]];
    run.exit_code = status.exit_code;
    run.signal = status.signal;
  }
  for (int rank = 0; rank < nproc; ++rank) {
    if (!logs[rank].empty()) runs[rank].output = read_file(logs[rank]);
  }
  return runs;
}

}  // namespace testing_util
}  // namespace ddpx
