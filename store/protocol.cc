#include "store/protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpx {
namespace protocol {

const char* query_type_name(QueryType type) {
  switch (type) {
    case QueryType::kValidate: return "VALIDATE";
    case QueryType::kSet: return "SET";
    case QueryType::kCompareSet: return "COMPARE_SET";
    case QueryType::kGet: return "GET";
    case QueryType::kAdd: return "ADD";
    case QueryType::kCheck: return "CHECK";
    case QueryType::kWait: return "WAIT";
    case QueryType::kGetNumKeys: return "GETNUMKEYS";
    case QueryType::kDeleteKey: return "DELETE_KEY";
    case QueryType::kAppend: return "APPEND";
    case QueryType::kMultiGet: return "MULTI_GET";
    case QueryType::kMultiSet: return "MULTI_SET";
    case QueryType::kCancelWait: return "CANCEL_WAIT";
    case QueryType::kPing: return "PING";
  }
  return "UNKNOWN";
}

uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint64_t read_u64(const uint8_t* p) {
  return static_cast<uint64_t>(read_u32(p)) |
         static_cast<uint64_t>(read_u32(p + 4)) << 32;
}

namespace {

// Walks one frame. Used twice per request: once without copying to learn
// whether the frame is complete (and how long it is), then once copying its
// keys and values into `target`.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, uint64_t max_length, Request* target)
      : data_(data), size_(size), max_length_(max_length), target_(target) {}

  // Trims the target's keys and values to those this frame carried.
  void finish() {
    if (target_ == nullptr) return;
    target_->keys.resize(keys_used_);
    target_->values.resize(values_used_);
  }

  bool short_of_data() const { return need_ > 0; }
  size_t need() const { return need_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  size_t pos() const { return pos_; }
  bool ok() const { return need_ == 0 && error_.empty(); }

  bool u8(uint8_t* v) {
    if (!have(1)) return false;
    *v = data_[pos_++];
    return true;
  }
  bool u32(uint32_t* v) {
    if (!have(4)) return false;
    *v = read_u32(data_ + pos_);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t* v) {
    if (!have(8)) return false;
    *v = read_u64(data_ + pos_);
    pos_ += 8;
    return true;
  }

  // A length prefix, checked against the limit before anything trusts it.
  bool length(const char* what, uint64_t* len) {
    if (!u64(len)) return false;
    if (*len > max_length_) {
      return fail(absl::StrCat(what, " length ", *len, " exceeds the limit of ",
                               max_length_, " bytes"));
    }
    return true;
  }

  bool key() { return string("key", target_ ? &target_->keys : nullptr, &keys_used_); }
  bool value(const char* what) {
    return string(what, target_ ? &target_->values : nullptr, &values_used_);
  }

  // A key count: every key takes at least its 8-byte length prefix.
  bool count(uint64_t* n) {
    if (!u64(n)) return false;
    if (*n > max_length_ / 8) {
      return fail(absl::StrCat("key count ", *n, " exceeds the limit of ",
                               max_length_ / 8, " keys"));
    }
    return true;
  }

  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

 private:
  // Copies into the next slot of *out, overwriting a string an earlier
  // request left there: a server decoding into one Request allocates nothing
  // in the steady state.
  bool string(const char* what, std::vector<std::string>* out, size_t* used) {
    uint64_t len;
    if (!length(what, &len)) return false;
    if (!have(len)) return false;
    if (out != nullptr) {
      const char* bytes = reinterpret_cast<const char*>(data_ + pos_);
      if (*used < out->size()) {
        (*out)[*used].assign(bytes, static_cast<size_t>(len));
      } else {
        out->emplace_back(bytes, static_cast<size_t>(len));
      }
      ++*used;
    }
    pos_ += static_cast<size_t>(len);
    return true;
  }

  bool have(uint64_t n) {
    if (n > max_length_ || pos_ + n + 1 > max_length_) {
      // The frame (type byte + arguments) may not outgrow the limit either.
      return fail(absl::StrCat("frame longer than the limit of ", max_length_,
                               " bytes"));
    }
    if (size_ - pos_ < n) {
      need_ = pos_ + static_cast<size_t>(n);
      return false;
    }
    return true;
  }

  const uint8_t* data_;
  size_t size_;
  uint64_t max_length_;
  Request* target_;  // null while probing
  size_t keys_used_ = 0;
  size_t values_used_ = 0;
  size_t pos_ = 0;
  size_t need_ = 0;
  std::string error_;
};

// Walks the arguments of `type`; false when short of data or malformed.
bool walk_arguments(QueryType type, Cursor& c, Request* r) {
  switch (type) {
    case QueryType::kValidate:
      return c.u32(&r->magic);
    case QueryType::kPing:
      return c.u32(&r->nonce);
    case QueryType::kGetNumKeys:
    case QueryType::kCancelWait:
      return true;
    case QueryType::kSet:
    case QueryType::kAppend:
      return c.key() && c.value("value");
    case QueryType::kCompareSet:
      return c.key() &&
             c.value("expected value") &&
             c.value("desired value");
    case QueryType::kGet:
    case QueryType::kDeleteKey:
      return c.key();
    case QueryType::kAdd: {
      uint64_t delta;
      if (!c.key() || !c.u64(&delta)) return false;
      r->delta = static_cast<int64_t>(delta);
      return true;
    }
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet: {
      uint64_t n;
      if (!c.count(&n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!c.key()) return false;
      }
      return true;
    }
    case QueryType::kMultiSet: {
      uint64_t n;
      if (!c.count(&n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!c.key() || !c.value("value")) {
          return false;
        }
      }
      return true;
    }
  }
  return c.fail("unreachable query type");
}

void release_if_large(std::vector<std::string>* strings) {
  constexpr size_t kMaxKeptStrings = 256;
  constexpr size_t kMaxKeptBytes = 64 << 10;
  if (strings->capacity() > kMaxKeptStrings) {
    std::vector<std::string>().swap(*strings);
    return;
  }
  for (std::string& s : *strings) {
    if (s.capacity() > kMaxKeptBytes) std::string().swap(s);
  }
}

}  // namespace

FrameDecoder::Result FrameDecoder::decode(const uint8_t* data, size_t size,
                                          Request* request) const {
  Result result;
  if (size == 0) {
    result.need_at_least = 1;
    return result;
  }
  uint8_t type_byte = data[0];
  if (type_byte > kLastSupportedQueryType) {
    result.outcome = Outcome::kMalformed;
    result.error = absl::StrFormat("unknown query type 0x%02x", type_byte);
    return result;
  }
  const QueryType type = static_cast<QueryType>(type_byte);

  // Pass 1: is the whole frame here, and is it well formed?
  Request scratch;
  Cursor probe(data + 1, size - 1, max_length_, /*target=*/nullptr);
  walk_arguments(type, probe, &scratch);
  if (probe.failed()) {
    result.outcome = Outcome::kMalformed;
    result.error =
        absl::StrCat(query_type_name(type), " request: ", probe.error());
    return result;
  }
  if (probe.short_of_data()) {
    result.need_at_least = probe.need() + 1;
    return result;
  }

  // Pass 2: copy the arguments out, into the storage the previous request
  // left unless that is large: one huge value or key list must not stay
  // allocated for the life of the connection.
  release_if_large(&request->keys);
  release_if_large(&request->values);
  request->type = type;
  request->magic = 0;
  request->nonce = 0;
  request->delta = 0;
  Cursor copy(data + 1, size - 1, max_length_, request);
  walk_arguments(type, copy, request);
  copy.finish();
  result.outcome = Outcome::kComplete;
  result.consumed = copy.pos() + 1;
  return result;
}

FrameWriter& FrameWriter::u8(uint8_t v) {
  out_->push_back(static_cast<char>(v));
  return *this;
}

FrameWriter& FrameWriter::u32(uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out_->append(b, 4);
  return *this;
}

FrameWriter& FrameWriter::u64(uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out_->append(b, 8);
  return *this;
}

FrameWriter& FrameWriter::bytes(absl::string_view v) {
  u64(v.size());
  out_->append(v.data(), v.size());
  return *this;
}

FrameWriter& FrameWriter::bytes(const std::vector<uint8_t>& v) {
  return bytes(absl::string_view(reinterpret_cast<const char*>(v.data()),
                                 v.size()));
}

std::string encode_request(const Request& r) {
  std::string out;
  FrameWriter w(&out);
  w.query(r.type);
  switch (r.type) {
    case QueryType::kValidate:
      w.u32(r.magic);
      break;
    case QueryType::kPing:
      w.u32(r.nonce);
      break;
    case QueryType::kGetNumKeys:
    case QueryType::kCancelWait:
      break;
    case QueryType::kSet:
    case QueryType::kAppend:
      w.bytes(r.keys.at(0)).bytes(r.values.at(0));
      break;
    case QueryType::kCompareSet:
      w.bytes(r.keys.at(0)).bytes(r.values.at(0)).bytes(r.values.at(1));
      break;
    case QueryType::kGet:
    case QueryType::kDeleteKey:
      w.bytes(r.keys.at(0));
      break;
    case QueryType::kAdd:
      w.bytes(r.keys.at(0)).i64(r.delta);
      break;
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
      w.u64(r.keys.size());
      for (const auto& k : r.keys) w.bytes(k);
      break;
    case QueryType::kMultiSet:
      w.u64(r.keys.size());
      for (size_t i = 0; i < r.keys.size(); ++i) {
        w.bytes(r.keys[i]).bytes(r.values.at(i));
      }
      break;
  }
  return out;
}

}  // namespace protocol
}  // namespace ddpx
