#include "store/store_state.h"

#include <algorithm>
#include <charconv>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpx {

using protocol::CheckResponse;
using protocol::FrameWriter;
using protocol::QueryType;
using protocol::WaitResponse;

namespace {

void reply_byte(std::string* reply, uint8_t b) { reply->push_back(static_cast<char>(b)); }

}  // namespace

absl::Status StoreState::apply(ClientId client, const protocol::Request& r,
                               std::string* reply, std::vector<ClientId>* woken) {
  FrameWriter w(reply);
  switch (r.type) {
    case QueryType::kValidate:
      if (r.magic != protocol::kValidationMagic) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "VALIDATE with magic 0x%08x instead of 0x%08x", r.magic,
            protocol::kValidationMagic));
      }
      return absl::OkStatus();
    case QueryType::kPing:
      w.u32(r.nonce);
      return absl::OkStatus();
    case QueryType::kSet:
      store(r.keys[0], r.values[0], woken);
      return absl::OkStatus();
    case QueryType::kCompareSet: {
      const std::string& key = r.keys[0];
      const std::string& expected = r.values[0];
      const std::string& desired = r.values[1];
      auto it = data_.find(key);
      if (it == data_.end()) {
        if (expected.empty()) {
          store(key, desired, woken);
          w.bytes(desired);
        } else {
          w.bytes(expected);
        }
      } else {
        if (it->second == expected) it->second = desired;
        w.bytes(it->second);
      }
      return absl::OkStatus();
    }
    case QueryType::kGet: {
      // Clients WAIT before they GET, so a missing key is only seen by a
      // client that skipped that; it gets an empty value, as from torch.
      auto it = data_.find(r.keys[0]);
      w.bytes(it == data_.end() ? absl::string_view() : it->second);
      return absl::OkStatus();
    }
    case QueryType::kAdd: {
      int64_t value = 0;
      auto it = data_.find(r.keys[0]);
      if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ADD on key '", r.keys[0], "' whose value is not an integer"));
      }
      // Wrapping like the two's complement hardware does, never UB.
      value = static_cast<int64_t>(static_cast<uint64_t>(value) +
                                   static_cast<uint64_t>(r.delta));
      char text[24];  // the decimal text torch stores; no heap round trip
      const char* end = std::to_chars(text, text + sizeof(text), value).ptr;
      const absl::string_view decimal(text, static_cast<size_t>(end - text));
      if (it != data_.end()) {
        it->second.assign(decimal.data(), decimal.size());
      } else {
        store(r.keys[0], decimal, woken);
      }
      w.i64(value);
      return absl::OkStatus();
    }
    case QueryType::kCheck: {
      bool all = std::all_of(r.keys.begin(), r.keys.end(),
                             [&](const std::string& k) { return data_.count(k) > 0; });
      reply_byte(reply, static_cast<uint8_t>(all ? CheckResponse::kReady
                                                 : CheckResponse::kNotReady));
      return absl::OkStatus();
    }
    case QueryType::kWait:
      if (is_waiting(client)) {
        return absl::FailedPreconditionError(
            "WAIT while an earlier WAIT of the same client is still pending");
      }
      start_wait(client, r.keys, reply);
      return absl::OkStatus();
    case QueryType::kCancelWait:
      cancel_wait(client);
      reply_byte(reply, static_cast<uint8_t>(WaitResponse::kWaitCanceled));
      return absl::OkStatus();
    case QueryType::kGetNumKeys:
      w.i64(static_cast<int64_t>(data_.size()));
      return absl::OkStatus();
    case QueryType::kDeleteKey:
      w.i64(static_cast<int64_t>(data_.erase(r.keys[0])));
      return absl::OkStatus();
    case QueryType::kAppend: {
      auto it = data_.find(r.keys[0]);
      if (it == data_.end()) {
        store(r.keys[0], r.values[0], woken);
      } else {
        it->second += r.values[0];
      }
      return absl::OkStatus();
    }
    case QueryType::kMultiGet:
      for (const auto& k : r.keys) {
        auto it = data_.find(k);
        w.bytes(it == data_.end() ? absl::string_view() : it->second);
      }
      return absl::OkStatus();
    case QueryType::kMultiSet:
      for (size_t i = 0; i < r.keys.size(); ++i) store(r.keys[i], r.values[i], woken);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown query type");
}

void StoreState::store(const std::string& key, absl::string_view value,
                       std::vector<ClientId>* woken) {
  auto it = data_.find(key);
  if (it != data_.end()) {
    // Reuse a small value's storage; a large one is replaced, so a key once
    // set to megabytes does not keep them after being set to a byte.
    constexpr size_t kReusedBytes = 64 << 10;
    if (it->second.capacity() <= kReusedBytes) {
      it->second.assign(value.data(), value.size());
    } else {
      it->second = std::string(value);
    }
    return;
  }
  data_.emplace(key, std::string(value));
  key_created(key, woken);
}

void StoreState::key_created(const std::string& key, std::vector<ClientId>* woken) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<ClientId> clients = std::move(it->second);
  waiters_.erase(it);
  for (ClientId c : clients) {
    auto w = waits_.find(c);
    if (w == waits_.end()) continue;
    auto& keys = w->second.keys;
    auto pos = std::find(keys.begin(), keys.end(), key);
    if (pos != keys.end()) keys.erase(pos);
    if (--w->second.missing == 0) {
      waits_.erase(w);
      woken->push_back(c);
    }
  }
}

void StoreState::start_wait(ClientId client, const std::vector<std::string>& keys,
                            std::string* reply) {
  PendingWait wait;
  for (const auto& k : keys) {
    if (data_.count(k)) continue;
    // A key named twice counts once.
    if (std::find(wait.keys.begin(), wait.keys.end(), k) != wait.keys.end()) continue;
    wait.keys.push_back(k);
  }
  if (wait.keys.empty()) {
    reply_byte(reply, static_cast<uint8_t>(WaitResponse::kStopWaiting));
    return;
  }
  wait.missing = wait.keys.size();
  for (const auto& k : wait.keys) waiters_[k].push_back(client);
  waits_.emplace(client, std::move(wait));
}

void StoreState::cancel_wait(ClientId client) {
  auto w = waits_.find(client);
  if (w == waits_.end()) return;
  for (const auto& k : w->second.keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    auto& clients = it->second;
    auto pos = std::find(clients.begin(), clients.end(), client);
    if (pos != clients.end()) {
      *pos = clients.back();
      clients.pop_back();
    }
    if (clients.empty()) waiters_.erase(it);
  }
  waits_.erase(w);
}

void StoreState::forget(ClientId client) { cancel_wait(client); }

}  // namespace ddpx
