// Progress for people (a live line on rank 0) and for programs (JSON lines
// in --metrics_out: one object per step and one per epoch).
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

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_METRICS_H_
