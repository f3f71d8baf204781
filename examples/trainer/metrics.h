// Progress for people (a live line on rank 0) and for programs (JSON lines
// in --metrics_out: one object per step, one per epoch, and one per change
// of an elastic run's membership).
#ifndef DDPX_EXAMPLES_TRAINER_METRICS_H_
#define DDPX_EXAMPLES_TRAINER_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ddpx::trainer {

// A flat JSON object built field by field, numbers and strings only.
class JsonLine {
 public:
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, int64_t value);
  JsonLine& add(const std::string& key, const std::string& value);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  // Appends to `path` (a resumed run continues the file). Empty: disabled.
  absl::Status open(const std::string& path);
  void write(const JsonLine& line);

 private:
  FILE* file_ = nullptr;
};

// "1.2 MB", "734 kB", "12 B".
std::string human_bytes(double bytes);

// Rewrites one terminal line in place when stdout is a TTY; prints plain
// lines otherwise (logs, CI).
class LiveLine {
 public:
  LiveLine();
  void update(const std::string& text);
  // Ends the live line so that the next output starts on a fresh line.
  void finish();

 private:
  bool tty_;
  bool open_ = false;
};

// One training step as rank 0 reports it.
struct StepReport {
  int64_t epoch = 0;            // 0-based
  int64_t epochs = 0;
  int64_t step_in_epoch = 0;    // 0-based
  int64_t steps_per_epoch = 0;
  int64_t global_step = 0;      // steps taken, this one included
  int world_size = 1;
  int64_t batch = 0;            // this step's samples per rank
  int64_t batch_size = 0;       // --batch_size
  double loss = 0;
  double step_time_s = 0;
  double comm_wait_s = 0;
  uint64_t bytes_sent = 0;
  uint64_t gradient_bytes = 0;
  double compression_ratio = 1;
  double lr = 0;
  double wall_s = 0;
};

// The {"type":"step",...} JSON line of one step.
JsonLine step_json(const StepReport& step);

// Rank 0's per-step output: every step's JSON line in --metrics_out, and a
// progress line (throughput and comm wait over the steps since the last
// one) every `log_every` steps and on an epoch's last step.
class StepLog {
 public:
  StepLog(MetricsWriter& metrics, LiveLine& live, int64_t log_every)
      : metrics_(metrics), live_(live), log_every_(log_every) {}
  // The progress line's window restarts with each epoch (and after each
  // progress line).
  void restart_window() { window_time_ = window_wait_ = 0, window_steps_ = 0; }
  void write(const StepReport& step) { write(step, step_json(step)); }
  // `line`: step_json(step) with what the caller adds (an elastic run's
  // generation).
  void write(const StepReport& step, const JsonLine& line);

 private:
  MetricsWriter& metrics_;
  LiveLine& live_;
  const int64_t log_every_;
  double window_time_ = 0, window_wait_ = 0;
  int64_t window_steps_ = 0;
};

// The end of one epoch as rank 0 reports it.
struct EpochReport {
  int64_t epoch = 0;        // 0-based
  int64_t global_step = 0;  // steps taken so far
  bool stopped = false;     // at --max_steps, before the epoch's end
  double train_loss = 0;    // over the whole epoch, steps before a resume included
  double test_loss = 0;
  double test_acc = 0;      // a fraction
  double epoch_time_s = 0;
  double wall_s = 0;
};

// Prints the epoch's line and returns its {"type":"epoch",...} JSON line,
// to which the trainer adds what describes its run (hook, backend, ...).
JsonLine report_epoch(const EpochReport& epoch);

// A change of an elastic run's world (docs/elastic.md), as rank 0 of the
// generation that formed reports it.
struct MembershipReport {
  int64_t generation = 0;
  int world_size = 0;
  std::vector<int64_t> members;  // member ids, in rank order
  std::vector<int64_t> left;     // of the previous generation, not in this one
  std::vector<int64_t> joined;   // not in the previous generation
  int64_t global_step = 0;       // steps committed so far
  double recovery_s = 0;         // from the failure (or admission) to the new group
  int64_t steps_lost = 0;        // steps discarded by the failure
  std::string cause;             // the failure; empty for an admission
  // Each generation that formed but could not start, and why.
  std::string failed_starts;
  double wall_s = 0;
};

// Prints the "membership: ..." line and returns its
// {"type":"membership",...} JSON line.
JsonLine report_membership(const MembershipReport& change);

// The wall clock in ms since the epoch: comparable across the processes of
// a job, where wall_s counts from whichever process is rank 0.
int64_t unix_ms();

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_METRICS_H_
