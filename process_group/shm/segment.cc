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
#include "absl/strings/str_format.h"

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

// The liveness lock's byte (segment.h): a read lock its creator holds, so
// that a probe for a write lock conflicts with it for as long as it is held.
struct flock liveness_lock(short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  return l;
}

// Refuses a segment this process should not trust (segment.h): not a
// regular file, another user's, or open to group or others.
absl::Status check_trusted(const struct stat& st, const std::string& name) {
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing shared-memory segment ", path_of(name), ": not a regular file"));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing shared-memory segment ", path_of(name), ": it belongs to uid ", st.st_uid,
        ", not to this process's user (uid ", geteuid(),
        "); ranks of one job create their segments as their own user"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "refusing shared-memory segment %s: its mode is %04o, open to group or others "
        "(ranks create their segments 0600)",
        path_of(name), st.st_mode & 07777));
  }
  return absl::OkStatus();
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
  // Held until this descriptor closes (segment.h, liveness). EINVAL: a
  // kernel without OFD locks, where no peer can ask either.
  struct flock held = liveness_lock(F_RDLCK);
  if (fcntl(fd, F_OFD_SETLK, &held) != 0 && errno != EINVAL) {
    const int err = errno;
    close(fd);
    shm_unlink(slash_name.c_str());
    return errno_error("cannot lock", name, err);
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
  s.fd_ = fd;
  s.created_ = true;
  s.linked_ = true;
  return s;
}

absl::StatusOr<Segment> Segment::open(const std::string& name, size_t bytes) {
  const std::string slash_name = "/" + name;
  int fd = shm_open(slash_name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) return errno_error("cannot open", name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return errno_error("cannot inspect", name, err);
  }
  if (absl::Status trusted = check_trusted(st, name); !trusted.ok()) {
    close(fd);
    return trusted;
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory segment ", path_of(name), " has ", st.st_size, " bytes, expected ",
        bytes, " (a peer built with other settings?)"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return errno_error("cannot map", name, err);
  }
  Segment s;
  s.name_ = name;
  s.data_ = data;
  s.size_ = bytes;
  s.fd_ = fd;
  return s;
}

bool Segment::creator_gone() const {
  if (fd_ < 0 || created_) return false;
  struct flock probe = liveness_lock(F_WRLCK);
  if (fcntl(fd_, F_OFD_GETLK, &probe) != 0) return false;
  return probe.l_type == F_UNLCK;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    created_ = std::exchange(other.created_, false);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

Segment::~Segment() { release(); }

void Segment::unlink() {
  if (!linked_) return;
  shm_unlink(("/" + name_).c_str());
  flock(fd_, LOCK_UN);  // after the name is gone; the liveness lock stays
  linked_ = false;
}

void Segment::release() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);  // drops the liveness lock of a created one
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  created_ = false;
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
