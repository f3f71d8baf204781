#include "examples/trainer/checkpoint_fault.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "elastic/kill_point.h"

namespace ddpx::trainer {
namespace {

struct StopAt {
  bool set = false;
  int64_t step = 0;
  int rank = 0;
  std::string point;
  std::string marker;
};

StopAt read_stop_at() {
  StopAt s;
  const char* v = getenv("DDPX_CHECKPOINT_STOP_AT");
  if (v == nullptr) return s;
  std::vector<std::string> parts = absl::StrSplit(v, absl::MaxSplits(':', 3));
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &s.step) ||
      !absl::SimpleAtoi(parts[1], &s.rank)) {
    fprintf(stderr, "DDPX_CHECKPOINT_STOP_AT='%s' ignored: expected step:rank:point:marker\n", v);
    return s;
  }
  s.point = parts[2];
  s.marker = parts[3];
  s.set = true;
  return s;
}

}  // namespace

void checkpoint_stop_point(int64_t step, int rank, const std::string& point) {
  elastic::kill_point(("checkpoint/" + point).c_str(), rank, step);
  static const StopAt* const stop = new StopAt(read_stop_at());
  if (!stop->set || stop->step != step || stop->rank != rank || stop->point != point) return;
  const int fd = open(stop->marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  raise(SIGSTOP);
}

int checkpoint_read_errno(const std::string& path) {
  static const char* const suffix = getenv("DDPX_CHECKPOINT_READ_EIO");
  if (suffix == nullptr || *suffix == '\0' || !absl::EndsWith(path, suffix)) return 0;
  return EIO;
}

}  // namespace ddpx::trainer
