// Runs an elastic job of examples/train (--elastic --nproc=N, the launcher
// serving the store) as real processes, finds its ranks, and reads what it
// reported: for tests/elastic.
#ifndef DDPX_TESTS_ELASTIC_ELASTIC_JOB_H_
#define DDPX_TESTS_ELASTIC_ELASTIC_JOB_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "examples/launcher/child_process.h"

namespace ddpx::elastic_test {

// Names in /dev/shm that start with "ddpx.".
std::set<std::string> shm_segments();

class ElasticJob {
 public:
  // Starts `<program> --elastic --nproc=<nproc> <args>` with its output in
  // a fresh folder under TEST_TMPDIR named `name`; `program` is a trainer's
  // runfiles path (examples/train or examples/torch/train).
  ElasticJob(const std::string& name, int nproc, const std::vector<std::string>& args,
             const std::string& program = "examples/train");
  ~ElasticJob();

  const std::string& dir() const { return dir_; }
  const std::string& metrics_path() const { return metrics_; }
  // The pid of the live rank the launcher started in slot `slot`
  // (RANK=<slot>); -1 if none.
  pid_t rank_pid(int slot) const;
  // Waits (up to `timeout`) until rank 0 has written a step line with
  // "step" >= `step`; false on timeout or when the job ended first.
  bool wait_for_step(int64_t step, std::chrono::milliseconds timeout);
  // Waits (up to `timeout`) until the output holds `text`.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout);
  // Waits for the launcher to end; nullopt (and the job killed) on timeout.
  std::optional<launcher::ExitStatus> wait(std::chrono::milliseconds timeout);
  std::string output() const;
  // The metrics lines of a type ("step", "membership", "epoch"), as text.
  std::vector<std::string> metrics_lines(const std::string& type) const;

 private:
  std::string dir_;
  std::string log_;
  std::string metrics_;
  std::optional<launcher::ChildProcess> launcher_;
};

// The value of "key" in a JSON line written by JsonLine (numbers or
// strings), as text; empty if absent.
std::string json_field(const std::string& line, const std::string& key);

}  // namespace ddpx::elastic_test

#endif  // DDPX_TESTS_ELASTIC_ELASTIC_JOB_H_
