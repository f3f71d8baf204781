#include "elastic/kill_point.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace ddpx::elastic {
namespace {

struct Spec {
  std::string point;
  bool any_rank = false;
  int rank = -1;
  int64_t n = 0;
  int64_t seen = 0;  // this process's passes through `point` so far
};

struct Armed {
  std::mutex mu;
  std::vector<Spec> specs;
  std::string markers;  // DDPX_KILL_MARKERS, or empty
};

// Parsed once; null without DDPX_KILL_AT (or with a spec that does not parse,
// which is reported).
Armed* armed() {
  static Armed* const a = []() -> Armed* {
    const char* text = getenv("DDPX_KILL_AT");
    if (text == nullptr || *text == '\0') return nullptr;
    auto* out = new Armed;
    if (const char* m = getenv("DDPX_KILL_MARKERS")) out->markers = m;
    for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
      std::vector<std::string> parts = absl::StrSplit(item, ':');
      Spec s;
      if (parts.size() == 3) s.any_rank = parts[1] == "*";
      if (parts.size() != 3 || (!s.any_rank && !absl::SimpleAtoi(parts[1], &s.rank)) ||
          !absl::SimpleAtoi(parts[2], &s.n) || s.n < 0) {
        fprintf(stderr, "ddpx: DDPX_KILL_AT: '%s' is not <point>:<rank or *>:<n>\n",
                std::string(item).c_str());
        exit(2);
      }
      s.point = parts[0];
      out->specs.push_back(std::move(s));
    }
    return out;
  }();
  return a;
}

}  // namespace

void kill_point(const char* point, int rank, int64_t at) {
  Armed* a = armed();
  if (a == nullptr) return;
  std::lock_guard<std::mutex> lock(a->mu);
  for (Spec& s : a->specs) {
    if (s.point != point) continue;
    ++s.seen;
    if ((at >= 0 ? at : s.seen) != s.n || !(s.any_rank || s.rank == rank)) continue;
    if (!a->markers.empty()) {
      // Once per job: the first process to create the spec's marker dies.
      const std::string marker = a->markers + "/" + std::to_string(&s - a->specs.data());
      const int fd = open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) continue;  // fired already (EEXIST), or no marker folder: no kill
      close(fd);
    }
    fprintf(stderr, "ddpx: KILL POINT %s: rank %d kills itself (SIGKILL) at %lld (pid %d)\n",
            point, rank, static_cast<long long>(s.n), getpid());
    fflush(stderr);
    raise(SIGKILL);
  }
}

}  // namespace ddpx::elastic
