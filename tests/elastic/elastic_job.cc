#include "tests/elastic/elastic_job.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/rank_processes.h"

namespace ddpx::elastic_test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::set<std::string> shm_segments() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("ddpx.", 0) == 0) out.insert(name);
    }
    closedir(d);
  }
  return out;
}

std::string json_field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t at = line.find(k);
  if (at == std::string::npos) return "";
  at += k.size();
  if (line[at] == '"') {
    const size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
  size_t end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}

ElasticJob::ElasticJob(const std::string& name, int nproc, const std::vector<std::string>& args,
                       const std::string& program) {
  const char* tmp = getenv("TEST_TMPDIR");
  dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(dir_.c_str(), 0755);
  log_ = dir_ + "/log.txt";
  metrics_ = dir_ + "/metrics.jsonl";
  unlink(metrics_.c_str());
  launcher::SpawnOptions o;
  o.argv = {program, "--elastic", "--nproc=" + std::to_string(nproc),
            "--metrics_out=" + metrics_};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.output = launcher::SpawnOptions::Output::kFile;
  o.output_path = log_;
  o.stderr_with_stdout = true;
  o.env = {{"OPENBLAS_NUM_THREADS", "1"}};
  absl::StatusOr<launcher::ChildProcess> child = launcher::ChildProcess::spawn(o);
  if (child.ok()) launcher_.emplace(*std::move(child));
}

ElasticJob::~ElasticJob() {
  if (launcher_.has_value()) launcher_->kill(SIGKILL);
}

pid_t ElasticJob::rank_pid(int slot) const {
  if (!launcher_.has_value()) return -1;
  return rank_processes::find_rank_process(launcher_->pid(), slot);
}

bool ElasticJob::wait_for_step(int64_t step, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    for (const std::string& line : metrics_lines("step")) {
      if (atoll(json_field(line, "step").c_str()) >= step) return true;
    }
    if (launcher_.has_value() && kill(launcher_->pid(), 0) != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool ElasticJob::wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::optional<launcher::ExitStatus> ElasticJob::wait(std::chrono::milliseconds timeout) {
  if (!launcher_.has_value()) return std::nullopt;
  absl::StatusOr<launcher::ExitStatus> s = launcher_->wait_for(timeout);
  if (!s.ok()) {
    launcher_->kill(SIGKILL);
    return std::nullopt;
  }
  return *s;
}

std::string ElasticJob::output() const { return read_file(log_); }

std::vector<std::string> ElasticJob::metrics_lines(const std::string& type) const {
  std::vector<std::string> out;
  std::istringstream in(read_file(metrics_));
  std::string line;
  while (std::getline(in, line)) {
    if (json_field(line, "type") == type) out.push_back(line);
  }
  return out;
}

}  // namespace ddpx::elastic_test
