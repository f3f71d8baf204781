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
#include "core/little_endian.h"

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

// Our server's refusal of one request (memory limit, output budget): eight
// 0xFF bytes where the reply would start (no reply length, one-byte answer
// or PING echo can begin so), then the reason as a string. The server
// closes the connection after it. PROTOCOL.md, "Error replies".
constexpr uint64_t kErrorReplyMarker = ~0ull;

// Largest accepted length prefix (a key, a value, or a key count) unless a
// server is configured otherwise.
constexpr uint64_t kDefaultMaxLength = 256ull << 20;

// A decoded request. Its strings are views into the frame bytes the decoder
// was given (nothing is copied, so decoding costs no memory beyond the
// frame), valid while those bytes are. Which fields are used depends on type:
//   kValidate: magic        kPing: nonce          kGetNumKeys, kCancelWait: -
//   kSet, kAppend: key, value                     kGet, kDeleteKey: key
//   kCompareSet: key, value (expected), desired   kAdd: key, delta
//   kCheck, kWait, kMultiGet: count keys in list (read them with ListReader)
//   kMultiSet: count (key, value) pairs in list
struct Request {
  QueryType type = QueryType::kPing;
  uint32_t magic = 0;
  uint32_t nonce = 0;
  int64_t delta = 0;
  absl::string_view key;
  absl::string_view value;
  absl::string_view desired;
  uint64_t count = 0;
  absl::string_view list;  // the encoded strings after the count
};

// Walks the strings of a list the decoder accepted (so every length prefix
// is known to be in bounds). Copyable: a large request is executed in
// slices, and the reader keeps its place between them.
class ListReader {
 public:
  ListReader() = default;
  explicit ListReader(absl::string_view list) : rest_(list) {}
  bool done() const { return rest_.empty(); }
  size_t remaining() const { return rest_.size(); }
  absl::string_view next();

 private:
  absl::string_view rest_;
};

// A request in owned form, for clients and tests that build frames.
// keys/values as the Request comment says (MULTI_SET: keys[i], values[i]).
struct RequestFields {
  QueryType type = QueryType::kPing;
  uint32_t magic = 0;
  uint32_t nonce = 0;
  int64_t delta = 0;
  std::vector<std::string> keys;
  std::vector<std::string> values;
};

// Copies a decoded request out of its frame.
RequestFields to_fields(const Request& request);

// Decodes requests from a byte stream that arrives in arbitrary pieces.
//
// decode() looks at the bytes received so far (which start at a frame
// boundary) and either finds one complete request, asks for more bytes, or
// rejects the stream. It tells the caller how many bytes it needs at least,
// so a large value arriving in many pieces is not re-scanned on every piece,
// and with a Progress it resumes a long key list where the last call
// stopped: decoding any frame costs time linear in its size, however it is
// cut.
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

  // How far a list frame was checked; belongs to one frame of one stream.
  // Reset (or fresh) for each new frame; decode() resets it on kComplete
  // and kMalformed.
  struct Progress {
    size_t list_pos = 0;      // frame offset of the next unchecked entry; 0: none yet
    uint64_t entries_left = 0;
    uint64_t count = 0;
  };

  explicit FrameDecoder(uint64_t max_length = kDefaultMaxLength)
      : max_length_(max_length) {}

  // On kComplete overwrites every field of *request with views into data.
  Result decode(const uint8_t* data, size_t size, Request* request,
                Progress* progress = nullptr) const;

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
std::string encode_request(const RequestFields& request);
std::string encode_request(const Request& request);

// Little-endian reads, for clients parsing responses.
using little_endian::read_u32;
using little_endian::read_u64;

}  // namespace protocol
}  // namespace ddpx

#endif  // DDPX_STORE_PROTOCOL_H_
