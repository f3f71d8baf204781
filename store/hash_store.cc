#include "store/hash_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddpx {

HashStore::HashStore(std::chrono::milliseconds timeout)
    : HashStore(std::make_shared<State>(), timeout) {}

HashStore::HashStore(std::shared_ptr<State> state,
                     std::chrono::milliseconds timeout)
    : Store(timeout), state_(std::move(state)) {}

absl::Status HashStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->data[key] = value;
  state_->changed.notify_all();
  return absl::OkStatus();
}

std::vector<std::string> HashStore::wait_locked(
    std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
    std::chrono::milliseconds timeout) {
  auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (!state_->data.count(k)) out.push_back(k);
    return out;
  };
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> still = missing();
  while (!still.empty()) {
    if (state_->changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      return missing();
    }
    still = missing();
  }
  return still;
}

absl::StatusOr<Bytes> HashStore::get(const std::string& key,
                                     std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  std::vector<std::string> missing = wait_locked(lock, {key}, timeout);
  if (!missing.empty()) return wait_timeout_error(missing, timeout);
  return state_->data[key];
}

absl::StatusOr<int64_t> HashStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(state_->mu);
  int64_t value = 0;
  auto it = state_->data.find(key);
  if (it != state_->data.end() &&
      !absl::SimpleAtoi(to_string(it->second), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: add on key '", key, "' whose value is not an integer"));
  }
  value += delta;
  state_->data[key] = to_bytes(absl::StrCat(value));
  state_->changed.notify_all();
  return value;
}

absl::StatusOr<Bytes> HashStore::compare_set(const std::string& key,
                                             const Bytes& expected,
                                             const Bytes& desired) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->data.find(key);
  if (it == state_->data.end()) {
    if (!expected.empty()) return expected;
    state_->data[key] = desired;
    state_->changed.notify_all();
    return desired;
  }
  if (it->second == expected) {
    it->second = desired;
    state_->changed.notify_all();
  }
  return it->second;
}

absl::Status HashStore::wait(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  std::vector<std::string> missing = wait_locked(lock, keys, timeout);
  if (!missing.empty()) return wait_timeout_error(missing, timeout);
  return absl::OkStatus();
}

absl::StatusOr<bool> HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return state_->data.count(k) > 0; });
}

absl::StatusOr<bool> HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->data.erase(key) > 0;
}

absl::StatusOr<int64_t> HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return static_cast<int64_t>(state_->data.size());
}

absl::StatusOr<std::vector<Bytes>> HashStore::multi_get(
    const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  std::vector<std::string> missing = wait_locked(lock, keys, timeout);
  if (!missing.empty()) return wait_timeout_error(missing, timeout);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& k : keys) values.push_back(state_->data[k]);
  return values;
}

absl::Status HashStore::multi_set(const std::vector<std::string>& keys,
                                  const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: multi_set got ", keys.size(), " keys but ",
                     values.size(), " values"));
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  for (size_t i = 0; i < keys.size(); ++i) state_->data[keys[i]] = values[i];
  state_->changed.notify_all();
  return absl::OkStatus();
}

absl::Status HashStore::append(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(state_->mu);
  Bytes& current = state_->data[key];
  current.insert(current.end(), value.begin(), value.end());
  state_->changed.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> HashStore::clone() {
  return std::unique_ptr<Store>(new HashStore(state_, timeout()));
}

}  // namespace ddpx
