#include "examples/trainer/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "examples/trainer/durable_file.h"

namespace ddpx::trainer {
namespace {

absl::Status os_error(const char* call, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(call, "(", path, "): ", strerror(errno)));
}

std::string holder_text(const std::string& job_id) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("job ", job_id.empty() ? "(none)" : "'" + job_id + "'", " host ", host,
                      " pid ", getpid());
}

// What the holder wrote, for messages ("(unreadable)" when it cannot be read).
std::string read_holder(const std::string& path) {
  absl::StatusOr<std::string> text = read_whole_file(path);
  if (!text.ok()) return "(unreadable: " + std::string(text.status().message()) + ")";
  std::string s(absl::StripAsciiWhitespace(*text));
  return s.empty() ? "(empty)" : s;
}

}  // namespace

absl::Status hold_checkpoint_lock(const std::string& dir, const std::string& job_id) {
  // Folders this process holds; their descriptors stay open (and locked)
  // until exit.
  static std::mutex mu;
  static std::set<std::string>* const held = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (held->count(dir) != 0) return absl::OkStatus();
  if (absl::Status s = make_dir(dir); !s.ok()) return s;
  const std::string path = dir + "/" + kLockFile;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("open", path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const bool busy = errno == EWOULDBLOCK;
    absl::Status s = os_error("flock", path);
    close(fd);
    if (!busy) return s;
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint folder ", dir, " belongs to another running job: ", read_holder(path),
        " holds ", path, "; give this job another --checkpoint_dir, or wait for that job to "
        "end"));
  }
  const std::string previous = read_holder(path);
  const std::string mine = holder_text(job_id);
  const std::string text = mine + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) !=
                                   static_cast<ssize_t>(text.size()) ||
      fsync(fd) != 0) {
    absl::Status s = os_error("write", path);
    close(fd);
    return s;
  }
  if (previous != "(empty)" && previous != mine) {
    printf("%s: taking the checkpoint folder over from %s, which no longer holds it\n",
           path.c_str(), previous.c_str());
  }
  held->insert(dir);  // fd stays open: the lock lasts as long as the process
  return absl::OkStatus();
}

}  // namespace ddpx::trainer
