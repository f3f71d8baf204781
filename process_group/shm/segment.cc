#include "process_group/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddpx {
namespace shm {
namespace {

// A segment whose creator died between shm_open() and flock() is empty and
// unlocked, exactly like one whose creator is between those two calls now;
// only age tells them apart.
constexpr time_t kUnlockedEmptyGraceSeconds = 30;

std::string path_of(const std::string& name) {
  return absl::StrCat(kShmDirectory, "/", name);
}

absl::Status errno_error(const std::string& what, const std::string& name, int err) {
  const std::string text = absl::StrCat(what, " shared-memory segment ", path_of(name),
                                        ": ", strerror(err));
  if (err == ENOSPC || err == ENOMEM || err == EFBIG) return absl::ResourceExhaustedError(text);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(text);
  return absl::UnavailableError(text);
}

}  // namespace

absl::StatusOr<Segment> Segment::create(const std::string& name, size_t bytes) {
  const std::string slash_name = "/" + name;
  int fd = shm_open(slash_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error("cannot create", name, errno);
  // Taken before the segment has a size: the sweep treats a sized, unlocked
  // segment as abandoned.
  if (flock(fd, LOCK_SH) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(slash_name.c_str());
    return errno_error("cannot lock", name, err);
  }
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    close(fd);
    shm_unlink(slash_name.c_str());
    return errno_error(absl::StrCat("cannot reserve ", bytes, " bytes for"), name, err);
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    close(fd);
    shm_unlink(slash_name.c_str());
    return errno_error("cannot map", name, err);
  }
  Segment s;
  s.name_ = name;
  s.data_ = data;
  s.size_ = bytes;
  s.lock_fd_ = fd;
  return s;
}

absl::StatusOr<Segment> Segment::open(const std::string& name, size_t bytes) {
  const std::string slash_name = "/" + name;
  int fd = shm_open(slash_name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return errno_error("cannot open", name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory segment ", path_of(name), " has ", st.st_size, " bytes, expected ",
        bytes, " (a peer built with other settings?)"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (data == MAP_FAILED) return errno_error("cannot map", name, err);
  Segment s;
  s.name_ = name;
  s.data_ = data;
  s.size_ = bytes;
  return s;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

Segment::~Segment() { release(); }

void Segment::unlink() {
  if (lock_fd_ < 0) return;
  shm_unlink(("/" + name_).c_str());
  close(lock_fd_);  // drops the flock, after the name is gone
  lock_fd_ = -1;
}

void Segment::release() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

int sweep_stale_segments() {
  DIR* dir = opendir(kShmDirectory);
  if (dir == nullptr) return 0;
  int removed = 0;
  const time_t now = time(nullptr);
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, kSegmentPrefix)) continue;
    const std::string slash_name = "/" + name;
    int fd = shm_open(slash_name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) continue;
    struct stat st {};
    const bool locked_by_creator = flock(fd, LOCK_EX | LOCK_NB) != 0;
    const bool abandoned =
        !locked_by_creator && fstat(fd, &st) == 0 &&
        (st.st_size > 0 || now - st.st_ctime > kUnlockedEmptyGraceSeconds);
    // Unlinked while we hold the exclusive lock, so no creator can be
    // mid-setup on it.
    if (abandoned && shm_unlink(slash_name.c_str()) == 0) ++removed;
    close(fd);
  }
  closedir(dir);
  return removed;
}

int count_segments() {
  DIR* dir = opendir(kShmDirectory);
  if (dir == nullptr) return 0;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (absl::StartsWith(entry->d_name, kSegmentPrefix)) ++count;
  }
  closedir(dir);
  return count;
}

}  // namespace shm
}  // namespace ddpx
