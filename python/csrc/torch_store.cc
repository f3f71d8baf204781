#include "python/csrc/torch_store.h"

#include <exception>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <c10/util/Exception.h>

namespace ddpx_torch {
namespace {

// Runs `call` on torch's store; its exceptions become a status whose
// message starts with `what`. A timeout is reported for `keys`.
template <typename Call>
absl::Status guarded(const char* what, const std::vector<std::string>& keys,
                     std::chrono::milliseconds timeout, Call call) {
  try {
    call();
    return absl::OkStatus();
  } catch (const c10::DistStoreError& e) {
    std::string message = e.what_without_backtrace();
    if (absl::StrContains(absl::AsciiStrToLower(message), "timeout") ||
        absl::StrContains(message, "timed out")) {
      return ddpx::wait_timeout_error(keys, timeout);
    }
    return absl::UnavailableError(absl::StrCat("torch store: ", what, ": ", message));
  } catch (const c10::DistNetworkError& e) {
    return absl::UnavailableError(
        absl::StrCat("torch store: ", what, ": ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return absl::UnknownError(absl::StrCat("torch store: ", what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat("torch store: ", what, ": ", e.what()));
  }
}

}  // namespace

TorchStore::TorchStore(c10::intrusive_ptr<c10d::Store> store)
    : ddpx::Store(store->getTimeout()), store_(std::move(store)) {}

absl::Status TorchStore::set(const std::string& key, const ddpx::Bytes& value) {
  return guarded("set", {key}, timeout(), [&] { store_->set(key, value); });
}

absl::StatusOr<ddpx::Bytes> TorchStore::get(const std::string& key,
                                            std::chrono::milliseconds timeout) {
  ddpx::Bytes value;
  // torch's get() waits with the store's own timeout; this call's is waited
  // for first, so the get finds the key.
  absl::Status s = guarded("get", {key}, timeout, [&] {
    store_->wait({key}, timeout);
    value = store_->get(key);
  });
  if (!s.ok()) return s;
  return value;
}

absl::StatusOr<int64_t> TorchStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  absl::Status s = guarded("add", {key}, timeout(), [&] { value = store_->add(key, delta); });
  if (!s.ok()) return s;
  return value;
}

absl::StatusOr<ddpx::Bytes> TorchStore::compare_set(const std::string& key,
                                                    const ddpx::Bytes& expected,
                                                    const ddpx::Bytes& desired) {
  ddpx::Bytes value;
  absl::Status s = guarded("compare_set", {key}, timeout(),
                           [&] { value = store_->compareSet(key, expected, desired); });
  if (!s.ok()) return s;
  return value;
}

absl::Status TorchStore::wait(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) {
  return guarded("wait", keys, timeout, [&] { store_->wait(keys, timeout); });
}

absl::StatusOr<bool> TorchStore::check(const std::vector<std::string>& keys) {
  bool present = false;
  absl::Status s = guarded("check", keys, timeout(), [&] { present = store_->check(keys); });
  if (!s.ok()) return s;
  return present;
}

absl::StatusOr<bool> TorchStore::delete_key(const std::string& key) {
  bool existed = false;
  absl::Status s = guarded("delete_key", {key}, timeout(), [&] { existed = store_->deleteKey(key); });
  if (!s.ok()) return s;
  return existed;
}

absl::StatusOr<int64_t> TorchStore::num_keys() {
  int64_t n = 0;
  absl::Status s = guarded("num_keys", {}, timeout(), [&] { n = store_->getNumKeys(); });
  if (!s.ok()) return s;
  return n;
}

absl::StatusOr<std::vector<ddpx::Bytes>> TorchStore::multi_get(
    const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<ddpx::Bytes> values;
  absl::Status s = guarded("multi_get", keys, timeout, [&] {
    if (!keys.empty()) store_->wait(keys, timeout);
    values = store_->multiGet(keys);
  });
  if (!s.ok()) return s;
  return values;
}

absl::Status TorchStore::multi_set(const std::vector<std::string>& keys,
                                   const std::vector<ddpx::Bytes>& values) {
  return guarded("multi_set", keys, timeout(), [&] { store_->multiSet(keys, values); });
}

absl::Status TorchStore::append(const std::string& key, const ddpx::Bytes& value) {
  return guarded("append", {key}, timeout(), [&] { store_->append(key, value); });
}

absl::StatusOr<std::unique_ptr<ddpx::Store>> TorchStore::clone() {
  c10::intrusive_ptr<c10d::Store> copy;
  // TCPStore clones with a connection of its own; stores that cannot clone
  // (FileStore, HashStore) lock every call themselves and are shared.
  absl::Status s = guarded("clone", {}, timeout(), [&] { copy = store_->clone(); });
  if (!s.ok() || !copy) copy = store_;
  auto out = std::make_unique<TorchStore>(std::move(copy));
  out->set_timeout(timeout());
  return std::unique_ptr<ddpx::Store>(std::move(out));
}

}  // namespace ddpx_torch
