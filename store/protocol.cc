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

absl::string_view ListReader::next() {
  const uint64_t len = read_u64(reinterpret_cast<const uint8_t*>(rest_.data()));
  absl::string_view s = rest_.substr(8, static_cast<size_t>(len));
  rest_.remove_prefix(8 + static_cast<size_t>(len));
  return s;
}

namespace {

// Walks one frame once, keeping views of its strings.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, uint64_t max_length)
      : data_(data), size_(size), max_length_(max_length) {}

  bool short_of_data() const { return need_ > 0; }
  size_t need() const { return need_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  absl::string_view view(size_t from, size_t to) const {
    return absl::string_view(reinterpret_cast<const char*>(data_) + from, to - from);
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

  // A length prefix, checked against the limit before anything trusts it,
  // then the bytes.
  bool string(const char* what, absl::string_view* out) {
    uint64_t len;
    if (!u64(&len)) return false;
    if (len > max_length_) {
      return fail(absl::StrCat(what, " length ", len, " exceeds the limit of ",
                               max_length_, " bytes"));
    }
    if (!have(len)) return false;
    if (out != nullptr) *out = view(pos_, pos_ + static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return true;
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
  size_t pos_ = 0;
  size_t need_ = 0;
  std::string error_;
};

// Checks a key list (MULTI_SET: key/value pairs), resuming where *progress
// says an earlier call stopped, so no entry is looked at twice.
bool walk_list(Cursor& c, bool pairs, Request* r, FrameDecoder::Progress* progress) {
  FrameDecoder::Progress local;
  FrameDecoder::Progress& p = progress != nullptr ? *progress : local;
  if (p.list_pos == 0) {
    if (!c.count(&p.count)) return false;
    p.entries_left = p.count;
    p.list_pos = c.pos();
  }
  c.seek(p.list_pos);
  while (p.entries_left > 0) {
    if (!c.string("key", nullptr)) return false;
    if (pairs && !c.string("value", nullptr)) return false;
    --p.entries_left;
    p.list_pos = c.pos();
  }
  r->count = p.count;
  return true;
}

// Walks the arguments of `type`; false when short of data or malformed.
bool walk_arguments(QueryType type, Cursor& c, Request* r,
                    FrameDecoder::Progress* progress) {
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
      return c.string("key", &r->key) && c.string("value", &r->value);
    case QueryType::kCompareSet:
      return c.string("key", &r->key) && c.string("expected value", &r->value) &&
             c.string("desired value", &r->desired);
    case QueryType::kGet:
    case QueryType::kDeleteKey:
      return c.string("key", &r->key);
    case QueryType::kAdd: {
      uint64_t delta;
      if (!c.string("key", &r->key) || !c.u64(&delta)) return false;
      r->delta = static_cast<int64_t>(delta);
      return true;
    }
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
      return walk_list(c, /*pairs=*/false, r, progress);
    case QueryType::kMultiSet:
      return walk_list(c, /*pairs=*/true, r, progress);
  }
  return c.fail("unreachable query type");
}

bool is_list(QueryType type) {
  return type == QueryType::kCheck || type == QueryType::kWait ||
         type == QueryType::kMultiGet || type == QueryType::kMultiSet;
}

}  // namespace

FrameDecoder::Result FrameDecoder::decode(const uint8_t* data, size_t size,
                                          Request* request, Progress* progress) const {
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
  *request = Request();
  request->type = type;
  // Offsets below are relative to the byte after the type.
  Cursor c(data + 1, size - 1, max_length_);
  walk_arguments(type, c, request, progress);
  if (c.failed()) {
    if (progress != nullptr) *progress = Progress();
    result.outcome = Outcome::kMalformed;
    result.error = absl::StrCat(query_type_name(type), " request: ", c.error());
    return result;
  }
  if (c.short_of_data()) {
    result.need_at_least = c.need() + 1;
    return result;
  }
  if (is_list(type)) {
    // The list starts after the 8-byte count.
    request->list = c.view(8, c.pos());
    if (progress != nullptr) *progress = Progress();
  }
  result.outcome = Outcome::kComplete;
  result.consumed = c.pos() + 1;
  return result;
}

RequestFields to_fields(const Request& r) {
  RequestFields f;
  f.type = r.type;
  f.magic = r.magic;
  f.nonce = r.nonce;
  f.delta = r.delta;
  switch (r.type) {
    case QueryType::kSet:
    case QueryType::kAppend:
      f.keys = {std::string(r.key)};
      f.values = {std::string(r.value)};
      break;
    case QueryType::kCompareSet:
      f.keys = {std::string(r.key)};
      f.values = {std::string(r.value), std::string(r.desired)};
      break;
    case QueryType::kGet:
    case QueryType::kDeleteKey:
    case QueryType::kAdd:
      f.keys = {std::string(r.key)};
      break;
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
    case QueryType::kMultiSet: {
      ListReader list(r.list);
      for (uint64_t i = 0; i < r.count; ++i) {
        f.keys.emplace_back(list.next());
        if (r.type == QueryType::kMultiSet) f.values.emplace_back(list.next());
      }
      break;
    }
    default:
      break;
  }
  return f;
}

FrameWriter& FrameWriter::u8(uint8_t v) {
  out_->push_back(static_cast<char>(v));
  return *this;
}

FrameWriter& FrameWriter::u32(uint32_t v) {
  little_endian::append_u32(v, out_);
  return *this;
}

FrameWriter& FrameWriter::u64(uint64_t v) {
  little_endian::append_u64(v, out_);
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

std::string encode_request(const RequestFields& r) {
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

std::string encode_request(const Request& request) {
  return encode_request(to_fields(request));
}

}  // namespace protocol
}  // namespace ddpx
