#include "examples/trainer/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "examples/trainer/checkpoint_fault.h"

namespace ddpx::trainer {
namespace {

absl::Status os_error(const char* call, const std::string& path) {
  const int e = errno;
  return absl::UnavailableError(absl::StrCat(call, "(", path, "): ", strerror(e)));
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("write", path);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status write_file_durably(const std::string& path, absl::string_view contents,
                                const WriteObserver& observe) {
  auto at = [&](const char* point) {
    if (observe) observe(point);
  };
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("open", tmp);
  const size_t half = contents.size() / 2;
  absl::Status s = write_all(fd, contents.data(), half, tmp);
  if (s.ok()) {
    at("tmp_half");
    s = write_all(fd, contents.data() + half, contents.size() - half, tmp);
  }
  if (s.ok()) {
    at("tmp_written");
    if (fsync(fd) != 0) s = os_error("fsync", tmp);
  }
  if (close(fd) != 0 && s.ok()) s = os_error("close", tmp);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  at("tmp_synced");
  if (rename(tmp.c_str(), path.c_str()) != 0) return os_error("rename", tmp + " -> " + path);
  at("renamed");
  return sync_dir(parent_of(path));
}

absl::Status sync_dir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return os_error("open", dir);
  absl::Status s;
  if (fsync(fd) != 0) s = os_error("fsync", dir);
  close(fd);
  return s;
}

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path + " does not exist");
    return os_error("open", path);
  }
  std::string out;
  char buf[1 << 16];
  const int injected = checkpoint_read_errno(path);  // checkpoint_fault.h
  for (;;) {
    const ssize_t n = injected != 0 ? (errno = injected, -1) : read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = os_error("read", path);
      close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
  return os_error("mkdir", dir);
}

}  // namespace ddpx::trainer
