// The TCPStore wire protocol, byte-compatible with PyTorch 2.x's TCPStore
// (both its classic and its libuv server). store/PROTOCOL.md describes every
// frame; this header is the one place that encodes and decodes them.
//
// A request is one query-type byte followed by its arguments. Integers are
// little-endian fixed width; strings and byte vectors are a uint64 length
// followed by the bytes. Responses carry no type byte: the client knows what
// it asked for.
#ifndef DDPX_STORE_PROTOCOL_H_
#define DDPX_STORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddpx {
namespace protocol {

// Sent by every client right after connecting, after VALIDATE.
constexpr uint32_t kValidationMagic = 0x3C85F7CE;

// Values are the wire bytes (c10d's QueryType order).
enum class QueryType : uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
  kAppend = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kCancelWait = 12,
  kPing = 13,
};
constexpr uint8_t kLastSupportedQueryType = 13;

const char* query_type_name(QueryType type);

// One-byte responses.
enum class CheckResponse : uint8_t { kReady = 0, kNotReady = 1 };
enum class WaitResponse : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };

// Largest accepted length prefix (a key, a value, or a key count) unless a
// server is configured otherwise.
constexpr uint64_t kDefaultMaxLength = 256ull << 20;

// A decoded request. Which fields are used depends on `type`:
//   kValidate: magic        kPing: nonce          kGetNumKeys, kCancelWait: -
//   kSet, kAppend: keys[0], values[0]             kGet, kDeleteKey: keys[0]
//   kCompareSet: keys[0], values[0] (expected), values[1] (desired)
//   kAdd: keys[0], delta    kCheck, kWait, kMultiGet: keys
//   kMultiSet: keys, values (same length)
struct Request {
  QueryType type = QueryType::kPing;
  uint32_t magic = 0;
  uint32_t nonce = 0;
  int64_t delta = 0;
  std::vector<std::string> keys;
  std::vector<std::string> values;
};

// Decodes requests from a byte stream that arrives in arbitrary pieces.
//
// decode() looks at the bytes received so far (which start at a frame
// boundary) and either finds one complete request, asks for more bytes, or
// rejects the stream. It never copies a value before the whole frame is
// there, and tells the caller how many bytes it needs at least, so a large
// value arriving in many pieces is not re-scanned on every piece.
class FrameDecoder {
 public:
  enum class Outcome { kComplete, kNeedMore, kMalformed };

  struct Result {
    Outcome outcome = Outcome::kNeedMore;
    // kComplete: the bytes the request occupied.
    size_t consumed = 0;
    // kNeedMore: the stream must hold at least this many bytes before a
    // decode() can make progress.
    size_t need_at_least = 0;
    // kMalformed: why, e.g. "unknown query type 0x2a".
    std::string error;
  };

  explicit FrameDecoder(uint64_t max_length = kDefaultMaxLength)
      : max_length_(max_length) {}

  // On kComplete overwrites every field of *request. Passing the same Request
  // again and again reuses its strings' storage (no allocation per request
  // once they are large enough).
  Result decode(const uint8_t* data, size_t size, Request* request) const;

  uint64_t max_length() const { return max_length_; }

 private:
  uint64_t max_length_;
};

// Appends request or response fields to a byte buffer.
class FrameWriter {
 public:
  explicit FrameWriter(std::string* out) : out_(out) {}

  FrameWriter& query(QueryType type) { return u8(static_cast<uint8_t>(type)); }
  FrameWriter& u8(uint8_t v);
  FrameWriter& u32(uint32_t v);
  FrameWriter& u64(uint64_t v);
  FrameWriter& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  // uint64 length + bytes.
  FrameWriter& bytes(absl::string_view v);
  FrameWriter& bytes(const std::vector<uint8_t>& v);

 private:
  std::string* out_;
};

// Encodes one request as the wire bytes a torch client would send.
std::string encode_request(const Request& request);

// Little-endian reads, for clients parsing responses.
uint32_t read_u32(const uint8_t* p);
uint64_t read_u64(const uint8_t* p);

}  // namespace protocol
}  // namespace ddpx

#endif  // DDPX_STORE_PROTOCOL_H_
