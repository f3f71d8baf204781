#include "process_group/shm/peer_liveness.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture
#endif

namespace ddpx {
namespace shm {
namespace {

// The state letter of /proc/<pid>/stat ("1234 (name) S ..."; the name may
// hold spaces and parentheses, so the state follows the last ')'), or 0
// when the file cannot be read.
char proc_state(uint32_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  FILE* f = fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[512];
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close_paren = strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return 0;
  return close_paren[2];
}

}  // namespace

PeerLiveness::PeerLiveness(uint32_t pid, bool same_pid_namespace, const Segment* segment)
    : pid_(pid), same_pid_namespace_(same_pid_namespace), segment_(segment) {
  if (same_pid_namespace_ && pid_ != 0) {
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid_), 0));
  }
}

PeerLiveness::PeerLiveness(PeerLiveness&& other) noexcept { *this = std::move(other); }

PeerLiveness& PeerLiveness::operator=(PeerLiveness&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = other.pid_;
    same_pid_namespace_ = other.same_pid_namespace_;
    pidfd_ = std::exchange(other.pidfd_, -1);
    segment_ = std::exchange(other.segment_, nullptr);
  }
  return *this;
}

PeerLiveness::~PeerLiveness() {
  if (pidfd_ >= 0) close(pidfd_);
}

bool PeerLiveness::process_ended() const {
  if (!same_pid_namespace_ || pid_ == 0) return false;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  const char state = proc_state(pid_);
  if (state == 'Z' || state == 'X') return true;
  return state == 0 && kill(static_cast<pid_t>(pid_), 0) != 0 && errno == ESRCH;
}

const char* PeerLiveness::gone() const {
  if (process_ended()) return "exited";
  if (segment_ != nullptr && segment_->creator_gone()) {
    return "exited or closed its shared-memory group";
  }
  return nullptr;
}

std::string PeerLiveness::who() const {
  return absl::StrCat("pid ", pid_, same_pid_namespace_ ? "" : " in another pid namespace");
}

}  // namespace shm
}  // namespace ddpx
