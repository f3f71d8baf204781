#include "tests/flight_recorder/hang_harness.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "examples/launcher/launcher.h"
#include "gtest/gtest.h"

namespace ddpx::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fresh_dir() {
  static int n = 0;
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/hang_", getpid(), "_", n++);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start + 1));
}

}  // namespace

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

std::string op_named(const std::string& output) {
  std::smatch m;
  static const std::regex re("([a-z_]+ #[0-9]+) of group default_pg");
  return std::regex_search(output, m, re) ? m[1].str() : "";
}

bool names_rank(const std::string& output, int rank) {
  const std::regex re(absl::StrCat("rank ", rank, "(?![0-9]| of [0-9])"));
  return std::regex_search(output, re);
}

int64_t seq_at_step(const std::string& dump_path, const std::string& site, int64_t step) {
  std::istringstream in(read_file(dump_path));
  const std::string want_site = absl::StrCat("\"site\":\"", site, "\"");
  const std::string want_step = absl::StrCat("\"step\":", step, ",");
  static const std::regex seq_re("\"seq\":([0-9]+)");
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"type\":\"op\"") == std::string::npos) continue;
    if (line.find(want_site) == std::string::npos || line.find(want_step) == std::string::npos)
      continue;
    std::smatch m;
    if (std::regex_search(line, m, seq_re)) return std::stoll(m[1].str());
  }
  return -1;
}

void expect_scenario(const Scenario& sc, const ScenarioResult& r, const std::string& verdict,
                     bool names_culprit) {
  ASSERT_TRUE(r.fault_seen) << "rank " << sc.fault_rank << " never reached its fault:\n"
                            << r.ranks[sc.fault_rank].output;
  for (int rank = 0; rank < sc.world; ++rank) {
    const RankOutcome& o = r.ranks[rank];
    const bool gone = (sc.fault == "sigstop" || sc.fault == "sigkill") && rank == sc.fault_rank;
    if (gone) continue;
    SCOPED_TRACE(absl::StrCat("rank ", rank, " (", sc.program, " --inject_fault=", sc.fault, ")"));
    EXPECT_TRUE(o.exited_by_itself) << "still running at the end\n" << o.output;
    EXPECT_GT(o.status.exit_code, 0) << o.status.describe() << "\n" << o.output;
    EXPECT_LE(o.seconds_after_fault, sc.timeout_s + 10.0) << o.output;
    EXPECT_NE(op_named(o.output), "") << "no op and sequence number named:\n" << o.output;
    if (names_culprit && rank != sc.fault_rank) {
      EXPECT_TRUE(names_rank(o.output, sc.fault_rank))
          << "rank " << sc.fault_rank << " not named:\n" << o.output;
    }
    EXPECT_TRUE(file_exists(absl::StrCat(r.dir, "/rank", rank, ".jsonl"))) << "no dump";
  }
  EXPECT_EQ(r.verdict, verdict) << r.analysis;
}

ScenarioResult run_scenario(const Scenario& sc) {
  ScenarioResult result;
  result.dir = fresh_dir();
  const int port = launcher::pick_free_port();
  std::vector<launcher::ChildProcess> children;
  for (int r = 0; r < sc.world; ++r) {
    launcher::SpawnOptions o;
    o.argv = {sc.program,
              absl::StrCat("--init=tcp://127.0.0.1:", port),
              absl::StrCat("--rank=", r),
              absl::StrCat("--world_size=", sc.world),
              absl::StrCat("--timeout_s=", sc.timeout_s),
              "--trace_dir=" + result.dir,
              "--inject_fault=" + sc.fault,
              absl::StrCat("--inject_fault_rank=", sc.fault_rank),
              absl::StrCat("--inject_fault_at=", sc.fault_at)};
    o.argv.insert(o.argv.end(), sc.args.begin(), sc.args.end());
    o.env = sc.env;  // on top of this test's (TSAN_OPTIONS: tests/tsan_suppressions.cc)
    o.output = launcher::SpawnOptions::Output::kFile;
    o.output_path = absl::StrCat(result.dir, "/out", r, ".txt");
    o.stderr_with_stdout = true;
    o.die_with_parent = true;
    absl::StatusOr<launcher::ChildProcess> child = launcher::ChildProcess::spawn(o);
    if (!child.ok()) {
      fprintf(stderr, "cannot start rank %d: %s\n", r, child.status().ToString().c_str());
      abort();
    }
    children.push_back(std::move(*child));
  }
  result.ranks.resize(sc.world);
  std::vector<bool> done(sc.world, false);
  const auto start = Clock::now();
  Clock::time_point fault_time{};
  // Long enough for startup, the fault, the timeout and the reports.
  const auto give_up = start + std::chrono::seconds(90 + 3 * sc.timeout_s);
  const std::string victim_log = absl::StrCat(result.dir, "/out", sc.fault_rank, ".txt");
  for (;;) {
    const auto now = Clock::now();
    if (!result.fault_seen &&
        read_file(victim_log).find("FAULT INJECTION") != std::string::npos) {
      result.fault_seen = true;
      fault_time = now;
    }
    bool all = true;
    for (int r = 0; r < sc.world; ++r) {
      if (done[r]) continue;
      if (std::optional<launcher::ExitStatus> s = children[r].try_wait()) {
        done[r] = true;
        result.ranks[r].status = *s;
        result.ranks[r].exited_by_itself = true;
        result.ranks[r].seconds_after_fault =
            result.fault_seen ? std::chrono::duration<double>(now - fault_time).count() : -1;
        continue;
      }
      // A rank that stopped itself never exits: the others are what count.
      const bool stopped = sc.fault == "sigstop" && r == sc.fault_rank;
      if (!stopped) all = false;
    }
    if (all || now > give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < sc.world; ++r) {
    if (!done[r]) {
      children[r].kill(SIGKILL);
      absl::StatusOr<launcher::ExitStatus> s = children[r].wait_for(std::chrono::seconds(10));
      if (s.ok()) result.ranks[r].status = *s;
    }
    result.ranks[r].output = read_file(absl::StrCat(result.dir, "/out", r, ".txt"));
  }
  const std::string cmd = absl::StrCat("python3 tools/trace_analyze ", result.dir,
                                       sc.png ? "" : " --no-png", " 2>&1");
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) result.analysis.append(buf, n);
    pclose(p);
  }
  result.verdict = last_line(result.analysis);
  return result;
}

}  // namespace ddpx::testing
