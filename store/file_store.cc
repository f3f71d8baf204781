#include "store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/little_endian.h"

namespace ddpx {

// flock held for one operation.
class FileStore::Lock {
 public:
  Lock(int fd, int how) : fd_(fd) {
    while (flock(fd_, how) < 0) {
      if (errno != EINTR) {
        err_ = errno;
        return;
      }
    }
    held_ = true;
  }
  ~Lock() {
    if (held_) flock(fd_, LOCK_UN);
  }
  int error() const { return held_ ? 0 : err_; }

 private:
  int fd_;
  bool held_ = false;
  int err_ = 0;
};

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::open(
    const std::string& path, std::chrono::milliseconds timeout) {
  // O_NOFOLLOW: a link planted at the path must not redirect us to a file of
  // someone else's choosing. O_NONBLOCK: a FIFO or device at the path must
  // not block the open; it is refused below, once fstat says what it is.
  int fd = ::open(path.c_str(),
                  O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::PermissionDeniedError(absl::StrCat(
          "file store: '", path, "' is a symbolic link; refusing to follow it (give the "
          "path of the store file itself)"));
    }
    return absl::UnavailableError(absl::StrCat("file store: cannot open '", path,
                                               "': ", std::strerror(err)));
  }
  absl::Status trusted = check_trusted(path, fd);
  if (trusted.ok() && fcntl(fd, F_SETFL, O_RDWR | O_APPEND) < 0) {
    trusted = absl::UnavailableError(absl::StrCat("file store: cannot use '", path,
                                                  "': fcntl: ", std::strerror(errno)));
  }
  if (!trusted.ok()) {
    close(fd);
    return trusted;
  }
  return std::unique_ptr<FileStore>(new FileStore(path, fd, timeout));
}

absl::Status FileStore::check_trusted(const std::string& path, int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0) {
    return absl::UnavailableError(absl::StrCat("file store: cannot stat '", path,
                                               "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "file store: '", path, "' is not a regular file (mode ", absl::StrFormat("0%o", st.st_mode),
        "); refusing to use it as a store"));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "file store: '", path, "' is owned by uid ", st.st_uid, ", not by this process (uid ",
        geteuid(), "); refusing a store file another user controls"));
  }
  // Our own file, but if others may write it they may put records in it
  // (addresses ranks connect to). Changing the mode now would not help: a
  // writer that opened it already keeps its descriptor.
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "file store: '", path, "' is writable by ",
        (st.st_mode & S_IWOTH) ? "other users" : "its group", " (mode ",
        absl::StrFormat("0%o", st.st_mode & 07777), "); refusing it: remove it, or chmod 600 it if "
        "nobody else can have it open"));
  }
  return absl::OkStatus();
}

FileStore::~FileStore() { close(fd_); }

absl::Status FileStore::error(const std::string& what, int err) const {
  return absl::UnavailableError(
      absl::StrCat("file store '", path_, "': ", what, ": ", std::strerror(err)));
}

void FileStore::encode(Op op, const std::string& key, const Bytes& value,
                       std::string* out) {
  out->push_back(static_cast<char>(op));
  little_endian::append_u64(key.size(), out);
  out->append(key);
  little_endian::append_u64(value.size(), out);
  out->append(value.begin(), value.end());
}

absl::Status FileStore::refresh_locked() {
  struct stat st;
  if (fstat(fd_, &st) < 0) return error("fstat", errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= offset_) return absl::OkStatus();
  std::string log(size - offset_, '\0');
  size_t got = 0;
  while (got < log.size()) {
    ssize_t n = pread(fd_, &log[got], log.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error("read", errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  // A record cut short (a writer died mid-write) stops the scan there.
  while (got - pos >= 17) {
    const Op op = static_cast<Op>(log[pos]);
    uint64_t klen = little_endian::read_u64(&log[pos + 1]);
    if (klen > got - pos - 17) break;
    uint64_t vlen = little_endian::read_u64(&log[pos + 9 + klen]);
    if (vlen > got - pos - 17 - klen) break;
    std::string key = log.substr(pos + 9, klen);
    const char* v = &log[pos + 17 + klen];
    switch (op) {
      case Op::kSet: data_[key] = Bytes(v, v + vlen); break;
      case Op::kDelete: data_.erase(key); break;
      case Op::kAppend: {
        Bytes& cur = data_[key];
        cur.insert(cur.end(), v, v + vlen);
        break;
      }
      default:
        return absl::DataLossError(absl::StrCat("file store '", path_,
                                                "': corrupt record at offset ",
                                                offset_ + pos));
    }
    pos += 17 + klen + vlen;
  }
  offset_ += pos;
  return absl::OkStatus();
}

absl::Status FileStore::write_locked(const std::string& records) {
  size_t off = 0;
  while (off < records.size()) {
    ssize_t n = write(fd_, records.data() + off, records.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error("write", errno);
    off += static_cast<size_t>(n);
  }
  // Our own records are read back like everyone else's.
  return refresh_locked();
}

#define DDPX_LOCK_OR_RETURN(how)                             \
  std::lock_guard<std::mutex> guard(mu_);                    \
  Lock flock_held(fd_, how);                                 \
  if (flock_held.error()) return error("flock", flock_held.error()); \
  if (absl::Status s = refresh_locked(); !s.ok()) return s

absl::Status FileStore::set(const std::string& key, const Bytes& value) {
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  std::string rec;
  encode(Op::kSet, key, value, &rec);
  return write_locked(rec);
}

absl::StatusOr<std::vector<std::string>> FileStore::missing_keys(
    const std::vector<std::string>& keys) {
  DDPX_LOCK_OR_RETURN(LOCK_SH);
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  return missing;
}

absl::Status FileStore::wait(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    absl::StatusOr<std::vector<std::string>> missing = missing_keys(keys);
    if (!missing.ok()) return missing.status();
    if (missing->empty()) return absl::OkStatus();
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return wait_timeout_error(*missing, timeout);
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

absl::StatusOr<Bytes> FileStore::get(const std::string& key,
                                     std::chrono::milliseconds timeout) {
  absl::StatusOr<std::vector<Bytes>> v = multi_get({key}, timeout);
  if (!v.ok()) return v.status();
  return std::move((*v)[0]);
}

absl::StatusOr<std::vector<Bytes>> FileStore::multi_get(
    const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  absl::Status s = wait(keys, timeout);
  if (!s.ok()) return s;
  DDPX_LOCK_OR_RETURN(LOCK_SH);
  std::vector<Bytes> values;
  for (const auto& k : keys) {
    auto it = data_.find(k);
    // Deleted between the wait and now: treat like a timeout on that key.
    if (it == data_.end()) return wait_timeout_error({k}, timeout);
    values.push_back(it->second);
  }
  return values;
}

absl::StatusOr<int64_t> FileStore::add(const std::string& key, int64_t delta) {
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end() && !absl::SimpleAtoi(to_string(it->second), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file store: add on key '", key, "' whose value is not an integer"));
  }
  value = static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(delta));
  std::string rec;
  encode(Op::kSet, key, to_bytes(absl::StrCat(value)), &rec);
  absl::Status w = write_locked(rec);
  if (!w.ok()) return w;
  return value;
}

absl::StatusOr<Bytes> FileStore::compare_set(const std::string& key, const Bytes& expected,
                                             const Bytes& desired) {
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  auto it = data_.find(key);
  bool replace = (it == data_.end()) ? expected.empty() : it->second == expected;
  if (!replace) return it == data_.end() ? expected : it->second;
  std::string rec;
  encode(Op::kSet, key, desired, &rec);
  absl::Status w = write_locked(rec);
  if (!w.ok()) return w;
  return desired;
}

absl::StatusOr<bool> FileStore::check(const std::vector<std::string>& keys) {
  absl::StatusOr<std::vector<std::string>> missing = missing_keys(keys);
  if (!missing.ok()) return missing.status();
  return missing->empty();
}

absl::StatusOr<bool> FileStore::delete_key(const std::string& key) {
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  if (!data_.count(key)) return false;
  std::string rec;
  encode(Op::kDelete, key, {}, &rec);
  absl::Status w = write_locked(rec);
  if (!w.ok()) return w;
  return true;
}

absl::StatusOr<int64_t> FileStore::num_keys() {
  DDPX_LOCK_OR_RETURN(LOCK_SH);
  return static_cast<int64_t>(data_.size());
}

absl::Status FileStore::multi_set(const std::vector<std::string>& keys,
                                  const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file store: multi_set got ", keys.size(), " keys but ", values.size(), " values"));
  }
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  std::string recs;
  for (size_t i = 0; i < keys.size(); ++i) encode(Op::kSet, keys[i], values[i], &recs);
  return write_locked(recs);
}

absl::Status FileStore::append(const std::string& key, const Bytes& value) {
  DDPX_LOCK_OR_RETURN(LOCK_EX);
  std::string rec;
  encode(Op::kAppend, key, value, &rec);
  return write_locked(rec);
}

#undef DDPX_LOCK_OR_RETURN

absl::StatusOr<std::unique_ptr<Store>> FileStore::clone() {
  absl::StatusOr<std::unique_ptr<FileStore>> copy = open(path_, timeout());
  if (!copy.ok()) return copy.status();
  return std::unique_ptr<Store>(std::move(*copy));
}

}  // namespace ddpx
