#include "tests/integration/train_runner.h"

#include "examples/launcher/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace ddpx::integration_test {

RunResult run_command(const std::string& command) {
  RunResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

std::string fresh_dir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  const std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  if (system(cmd.c_str()) != 0) abort();
  return dir;
}

std::string run_ranks(const std::string& dir, int world,
                      const std::function<std::string(int)>& rank_command) {
  std::string script;
  for (int r = 0; r < world; ++r)
    script += "(" + rank_command(r) + ") > " + dir + "/r" + std::to_string(r) + ".log 2>&1 & p" +
              std::to_string(r) + "=$!; ";
  for (int r = 0; r < world; ++r) {
    const std::string R = std::to_string(r);
    script += "wait $p" + R + "; echo \"rank " + R + " exit $?\"; ";
  }
  script += "cat " + dir + "/r*.log";
  return run_command("bash -c '" + script + "'").output;
}

pid_t start_stopped_at(const std::string& command, const std::string& stop_at,
                       const std::string& marker, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    setenv("DDPX_CHECKPOINT_STOP_AT", stop_at.c_str(), 1);
    execl("/bin/sh", "sh", "-c", (command + " > " + log_path + " 2>&1").c_str(), nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (access(marker.c_str(), F_OK) == 0) return pid;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return -1;  // ended without stopping
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill_job(pid);
  return -1;
}

void kill_job(pid_t pgid) {
  kill(-pgid, SIGKILL);  // the shell, the launcher and every rank
  waitpid(pgid, nullptr, 0);
  // Ranks are reparented once the launcher dies; wait until none is left
  // (bounded: where nobody reaps orphans, their zombies would stay).
  for (int i = 0; i < 1000 && kill(-pgid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

int free_port() { return launcher::pick_free_port(); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Enough JSON for the trainer's flat objects: "key":number or "key":"text".
std::vector<MetricsLine> read_metrics(const std::string& path) {
  std::vector<MetricsLine> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    MetricsLine m;
    size_t pos = 0;
    while ((pos = line.find('"', pos)) != std::string::npos) {
      const size_t key_end = line.find('"', pos + 1);
      const std::string key = line.substr(pos + 1, key_end - pos - 1);
      size_t v = key_end + 2;  // past ":
      std::string value;
      if (line[v] == '"') {
        const size_t end = line.find('"', v + 1);
        value = line.substr(v + 1, end - v - 1);
        pos = end + 1;
      } else {
        const size_t end = line.find_first_of(",}", v);
        value = line.substr(v, end - v);
        pos = end;
      }
      m[key] = value;
    }
    out.push_back(m);
  }
  return out;
}

std::vector<MetricsLine> lines_of_type(const std::vector<MetricsLine>& lines,
                                       const std::string& type) {
  std::vector<MetricsLine> out;
  for (const MetricsLine& l : lines)
    if (l.count("type") && l.at("type") == type) out.push_back(l);
  return out;
}

double number(const MetricsLine& line, const std::string& key) {
  auto it = line.find(key);
  return it == line.end() ? -1e300 : atof(it->second.c_str());
}

void expect_resume_matches_whole_run(const std::string& command, const std::string& dir,
                                     int stop, int end) {
  auto run_to = [&](int steps, const std::string& name) {
    return run_command(command + " --max_steps=" + std::to_string(steps) + " --checkpoint_dir=" +
                       dir + "/" + name + " --metrics_out=" + dir + "/" + name + ".jsonl");
  };
  RunResult whole = run_to(end, "whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  RunResult first = run_to(stop, "split");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = run_to(end, "split");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  std::vector<MetricsLine> a = lines_of_type(read_metrics(dir + "/whole.jsonl"), "step");
  std::vector<MetricsLine> b = lines_of_type(read_metrics(dir + "/split.jsonl"), "step");
  ASSERT_EQ(a.size(), static_cast<size_t>(end));
  ASSERT_EQ(b.size(), static_cast<size_t>(end));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "step " << i + 1;
  }
}

}  // namespace ddpx::integration_test
