// A Store kept in one file that several processes (on one machine, or on a
// shared filesystem with working flock) open by path: the file:// init method.
//
// The file is an append-only log of SET / DELETE / APPEND records. Every
// operation takes flock on it (shared to read, exclusive to write), reads the
// records other processes appended since its last look, then appends its own.
// Waiting re-reads the file with a short, growing pause: a filesystem has no
// way to push a wake-up across machines.
#ifndef DDPX_STORE_FILE_STORE_H_
#define DDPX_STORE_FILE_STORE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "store/store.h"

namespace ddpx {

class FileStore : public Store {
 public:
  // Creates the file (mode 0600) if it does not exist. The file decides
  // where ranks connect, so it must be trustworthy: a symbolic link at
  // `path` is never followed, and a path that is not a regular file, is
  // owned by another user, or is writable by its group or others is
  // refused (PERMISSION_DENIED naming the path and the reason).
  static absl::StatusOr<std::unique_ptr<FileStore>> open(
      const std::string& path, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

  absl::Status set(const std::string& key, const Bytes& value) override;
  absl::StatusOr<Bytes> get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  using Store::get;
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  absl::StatusOr<Bytes> compare_set(const std::string& key, const Bytes& expected,
                                    const Bytes& desired) override;
  absl::Status wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  using Store::wait;
  absl::StatusOr<bool> check(const std::vector<std::string>& keys) override;
  absl::StatusOr<bool> delete_key(const std::string& key) override;
  absl::StatusOr<int64_t> num_keys() override;
  absl::StatusOr<std::vector<Bytes>> multi_get(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds timeout) override;
  using Store::multi_get;
  absl::Status multi_set(const std::vector<std::string>& keys,
                         const std::vector<Bytes>& values) override;
  absl::Status append(const std::string& key, const Bytes& value) override;
  // Opens the file again (its own descriptor and lock).
  absl::StatusOr<std::unique_ptr<Store>> clone() override;
  using Store::set;

  const std::string& path() const { return path_; }

 private:
  enum class Op : uint8_t { kSet = 1, kDelete = 2, kAppend = 3 };
  class Lock;

  FileStore(std::string path, int fd, std::chrono::milliseconds timeout)
      : Store(timeout), path_(std::move(path)), fd_(fd) {}

  // Reads the records appended since the last look into data_.
  absl::Status refresh_locked();
  // Appends records (one write) and applies them to data_.
  absl::Status write_locked(const std::string& records);
  static void encode(Op op, const std::string& key, const Bytes& value, std::string* out);
  absl::StatusOr<std::vector<std::string>> missing_keys(
      const std::vector<std::string>& keys);
  absl::Status error(const std::string& what, int err) const;
  // Whether the opened `fd` may be used as a store (see open()).
  static absl::Status check_trusted(const std::string& path, int fd);

  std::string path_;
  int fd_;
  std::mutex mu_;
  uint64_t offset_ = 0;  // bytes of the log already applied to data_
  std::map<std::string, Bytes> data_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_FILE_STORE_H_
