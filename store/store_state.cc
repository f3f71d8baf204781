#include "store/store_state.h"

#include <charconv>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpx {

using protocol::CheckResponse;
using protocol::ListReader;
using protocol::QueryType;
using protocol::WaitResponse;

namespace {

// Bookkeeping per key besides its bytes (map slot, string header).
constexpr uint64_t kKeyOverhead = 64;
// An overwrite reuses a value's storage up to this size; a larger one is
// replaced, so a key once set to megabytes does not keep them.
constexpr size_t kReusedBytes = 64 << 10;

std::string shown(absl::string_view s) {
  constexpr size_t kShown = 32;
  std::string out = absl::CHexEscape(s.substr(0, kShown));
  if (s.size() > kShown) absl::StrAppend(&out, "...");
  return out;
}

}  // namespace

bool parse_leading_integer(absl::string_view text, int64_t* value) {
  size_t i = 0;
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  while (i < text.size() && space(text[i])) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  const size_t digits_start = i;
  // Accumulate as a negative number: its range includes INT64_MIN.
  int64_t acc = 0;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const int digit = text[i] - '0';
    if (acc < (kMin + digit) / 10) return false;  // out of range, as stoll
    acc = acc * 10 - digit;
  }
  if (i == digits_start) return false;
  if (!negative) {
    if (acc == kMin) return false;
    acc = -acc;
  }
  *value = acc;
  return true;
}

StoreState::StoreState(MemoryMeter* meter, uint64_t output_budget, WakeFn wake)
    : meter_(meter), output_budget_(output_budget), wake_(std::move(wake)), waits_(meter) {}

absl::Status StoreState::refuse_write(absl::string_view what, absl::string_view key,
                                      uint64_t bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " of '", shown(key), "' refused: ", bytes,
      " more bytes would pass the server's memory limit of ", meter_->limit(),
      " bytes (", meter_->used(), " in use); stored values are kept"));
}

absl::Status StoreState::store(absl::string_view key, absl::string_view value) {
  auto it = data_.find(key);
  if (it != data_.end()) {
    ValueRef& v = it->second;
    if (value.size() > v->size() && !meter_->fits(value.size() - v->size())) {
      return refuse_write("SET", key, value.size() - v->size());
    }
    if (v.use_count() == 1 && v->capacity() <= kReusedBytes &&
        value.size() <= kReusedBytes) {
      v->assign(value);
    } else {
      v = std::make_shared<StoredValue>(meter_, value);  // a reply may hold the old one
    }
    return absl::OkStatus();
  }
  const uint64_t cost = key.size() + kKeyOverhead + value.size() + StoredValue::kOverhead;
  if (!meter_->fits(cost)) return refuse_write("SET", key, cost);
  ValueRef v = std::make_shared<StoredValue>(meter_, value);
  auto inserted = data_.emplace(std::string(key), std::move(v)).first;
  meter_->add(key.size() + kKeyOverhead);
  waits_.key_created(inserted->first, wake_);
  return absl::OkStatus();
}

absl::Status StoreState::add(absl::string_view key, int64_t delta, int64_t* result) {
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end() && !parse_leading_integer(it->second->bytes(), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ADD on key '", shown(key), "' whose value '", shown(it->second->bytes()),
        "' does not start with an int64 (torch's servers close the connection too)"));
  }
  // Wrapping like the two's complement hardware does, never UB.
  value = static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(delta));
  char text[24];  // the decimal text torch stores; no heap round trip
  const char* end = std::to_chars(text, text + sizeof(text), value).ptr;
  absl::Status s = store(key, absl::string_view(text, static_cast<size_t>(end - text)));
  if (!s.ok()) return s;
  *result = value;
  return absl::OkStatus();
}

absl::Status StoreState::append(absl::string_view key, absl::string_view value) {
  auto it = data_.find(key);
  if (it == data_.end()) return store(key, value);
  if (!meter_->fits(value.size())) return refuse_write("APPEND", key, value.size());
  ValueRef& v = it->second;
  if (v.use_count() == 1) {
    v->append(value);
  } else {
    // A reply still sends the old bytes: build the longer value beside it.
    std::string joined = absl::StrCat(v->bytes(), value);
    v = std::make_shared<StoredValue>(meter_, joined);
  }
  return absl::OkStatus();
}

absl::Status StoreState::check_budget(uint64_t reply_size, uint64_t owed) const {
  if (owed + reply_size <= output_budget_) return absl::OkStatus();
  if (owed == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a reply of ", reply_size, " bytes or more exceeds the output budget of ",
        output_budget_, " bytes per connection"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "not reading its responses: it owes ", owed, " bytes, and a reply of ", reply_size,
      " bytes or more would pass the output budget of ", output_budget_,
      " bytes per connection"));
}

absl::Status StoreState::reply_value(const ValueRef* value, ReplyQueue* reply,
                                     uint64_t reply_so_far, uint64_t owed) {
  const uint64_t size = 8 + (value != nullptr ? (*value)->size() : 0);
  absl::Status s = check_budget(reply_so_far + size, owed);
  if (!s.ok()) return s;
  if (value == nullptr) {
    reply->u64(0);
  } else {
    reply->value(*value);
  }
  return absl::OkStatus();
}

absl::Status StoreState::compare_set(const protocol::Request& r, ReplyQueue* reply) {
  auto it = data_.find(r.key);
  if (it == data_.end()) {
    if (!r.value.empty()) {
      // torch answers the expected value and stores nothing.
      absl::Status s = check_budget(8 + r.value.size(), reply->owed());
      if (s.ok()) reply->bytes(r.value);
      return s;
    }
    absl::Status s = store(r.key, r.desired);
    if (!s.ok()) return s;
    it = data_.find(r.key);
  } else if (it->second->bytes() == r.value) {
    absl::Status s = store(r.key, r.desired);
    if (!s.ok()) return s;
  }
  return reply_value(&it->second, reply, 0, reply->owed());
}

absl::Status StoreState::apply(ClientId client, const protocol::Request& r,
                               const char* frame, ReplyQueue* reply,
                               std::unique_ptr<ListWork>* work) {
  switch (r.type) {
    case QueryType::kValidate:
      if (r.magic != protocol::kValidationMagic) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "VALIDATE with magic 0x%08x instead of 0x%08x", r.magic,
            protocol::kValidationMagic));
      }
      return absl::OkStatus();
    case QueryType::kPing:
      reply->u32(r.nonce);
      return absl::OkStatus();
    case QueryType::kSet:
      return store(r.key, r.value);
    case QueryType::kCompareSet:
      return compare_set(r, reply);
    case QueryType::kGet: {
      // Clients WAIT before they GET, so a missing key is only seen by a
      // client that skipped that; it gets an empty value.
      auto it = data_.find(r.key);
      return reply_value(it == data_.end() ? nullptr : &it->second, reply, 0, reply->owed());
    }
    case QueryType::kAdd: {
      int64_t value = 0;
      absl::Status s = add(r.key, r.delta, &value);
      if (s.ok()) reply->u64(static_cast<uint64_t>(value));
      return s;
    }
    case QueryType::kCancelWait:
      waits_.cancel(client);
      reply->u8(static_cast<uint8_t>(WaitResponse::kWaitCanceled));
      return absl::OkStatus();
    case QueryType::kGetNumKeys:
      reply->u64(data_.size());
      return absl::OkStatus();
    case QueryType::kDeleteKey: {
      auto it = data_.find(r.key);
      if (it == data_.end()) {
        reply->u64(0);
        return absl::OkStatus();
      }
      meter_->sub(it->first.size() + kKeyOverhead);
      data_.erase(it);
      reply->u64(1);
      return absl::OkStatus();
    }
    case QueryType::kAppend:
      return append(r.key, r.value);
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
    case QueryType::kMultiSet: {
      if (r.type == QueryType::kWait && is_waiting(client)) {
        return absl::FailedPreconditionError(
            "WAIT while an earlier WAIT of the same client is still pending");
      }
      auto w = std::make_unique<ListWork>(meter_);
      w->type = r.type;
      w->pos = static_cast<size_t>(r.list.data() - frame);
      w->end = w->pos + r.list.size();
      w->left = r.count;
      if (r.type == QueryType::kWait) waits_.begin(client);
      *work = std::move(w);
      return resume(client, frame, reply, work);
    }
  }
  return absl::InvalidArgumentError("unknown query type");
}

absl::Status StoreState::resume(ClientId client, const char* frame, ReplyQueue* reply,
                                std::unique_ptr<ListWork>* work) {
  ListWork* w = work->get();
  absl::Status s = step(client, frame, reply, w);
  if (!s.ok()) {
    if (w->type == QueryType::kWait) waits_.cancel(client);
    work->reset();
    return s;
  }
  if (w->left > 0) return absl::OkStatus();
  switch (w->type) {
    case QueryType::kCheck:
      reply->u8(static_cast<uint8_t>(w->all_present ? CheckResponse::kReady
                                                    : CheckResponse::kNotReady));
      break;
    case QueryType::kWait:
      if (waits_.finish_registering(client)) {
        reply->u8(static_cast<uint8_t>(WaitResponse::kStopWaiting));
      }
      break;
    case QueryType::kMultiGet:
      reply->splice(&w->reply);
      break;
    default:
      break;
  }
  work->reset();
  return absl::OkStatus();
}

absl::Status StoreState::step(ClientId client, const char* frame, ReplyQueue* reply,
                              ListWork* w) {
  ListReader list(absl::string_view(frame + w->pos, w->end - w->pos));
  size_t entries = 0, bytes = 0;
  absl::Status status;
  while (w->left > 0 && entries < kSliceEntries && bytes < kSliceBytes) {
    absl::string_view key = list.next();
    bytes += key.size();
    ++entries;
    switch (w->type) {
      case QueryType::kCheck:
        // Like torch's all_of: the first missing key decides.
        if (data_.find(key) == data_.end()) {
          w->all_present = false;
          w->left = 1;
          list = ListReader();
        }
        break;
      case QueryType::kWait:
        if (data_.find(key) != data_.end()) break;
        status = waits_.add(client, key, list.remaining() + 8 + key.size());
        break;
      case QueryType::kMultiGet: {
        auto it = data_.find(key);
        status = reply_value(it == data_.end() ? nullptr : &it->second, &w->reply,
                             w->reply.owed(), reply->owed());
        break;
      }
      case QueryType::kMultiSet: {
        absl::string_view value = list.next();
        bytes += value.size();
        status = store(key, value);
        break;
      }
      default:
        break;
    }
    if (!status.ok()) return status;
    --w->left;
  }
  w->pos = w->end - list.remaining();
  return absl::OkStatus();
}

void StoreState::forget(ClientId client) { waits_.cancel(client); }

}  // namespace ddpx
