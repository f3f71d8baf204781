// libFuzzer target for the TCPStore frame decoder (store/protocol.h).
//
// Feeds arbitrary bytes as a request stream and checks what must hold for
// any input: the decoder never reads past the data or crashes, a complete
// frame re-encodes to exactly the bytes it was decoded from and carries
// exactly the keys and values its type has (the stream is decoded into one
// reused Request, as the server does, so nothing may linger from the frame
// before), "need more" always asks for more than it has, and a stream fed
// in two pieces with a resumable Progress (as the server feeds a frame that
// arrives in pieces) decodes to the same frames as the whole stream. Built
// and run by run_fuzz.sh; the seed corpus is replayed by
// //tests/fuzz:frame_decoder_corpus_test.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "store/protocol.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "frame decoder invariant broken: %s\n", what);
    std::abort();
  }
}

// Keys and values a request of its type carries; -1: as many as it says.
void check_shape(const ddpx::protocol::RequestFields& r) {
  using ddpx::protocol::QueryType;
  long keys = 0, values = 0;
  switch (r.type) {
    case QueryType::kValidate:
    case QueryType::kPing:
    case QueryType::kGetNumKeys:
    case QueryType::kCancelWait:
      break;
    case QueryType::kSet:
    case QueryType::kAppend:
      keys = values = 1;
      break;
    case QueryType::kCompareSet:
      keys = 1;
      values = 2;
      break;
    case QueryType::kGet:
    case QueryType::kDeleteKey:
    case QueryType::kAdd:
      keys = 1;
      break;
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
      keys = -1;
      break;
    case QueryType::kMultiSet:
      keys = -1;
      values = static_cast<long>(r.keys.size());
      break;
  }
  check(keys < 0 || r.keys.size() == static_cast<size_t>(keys), "key count of the type");
  check(r.values.size() == static_cast<size_t>(values), "value count of the type");
}

// Decodes a whole stream; returns the frames it found, re-encoded.
std::string decode_stream(const ddpx::protocol::FrameDecoder& decoder, const uint8_t* data,
                          size_t size) {
  using Outcome = ddpx::protocol::FrameDecoder::Outcome;
  size_t pos = 0;
  std::string frames;
  ddpx::protocol::Request request;
  while (pos < size) {
    auto r = decoder.decode(data + pos, size - pos, &request);
    if (r.outcome == Outcome::kMalformed) {
      check(!r.error.empty(), "a malformed frame comes with a reason");
      break;
    }
    if (r.outcome == Outcome::kNeedMore) {
      check(r.need_at_least > size - pos, "need_at_least exceeds what is there");
      check(r.need_at_least <= decoder.max_length(), "need_at_least within the limit");
      break;
    }
    check(r.consumed > 0 && r.consumed <= size - pos, "consumed within the data");
    check(r.consumed <= decoder.max_length(), "frame within the limit");
    const ddpx::protocol::RequestFields fields = ddpx::protocol::to_fields(request);
    check_shape(fields);
    std::string again = ddpx::protocol::encode_request(fields);
    check(again.size() == r.consumed &&
              std::memcmp(again.data(), data + pos, r.consumed) == 0,
          "a decoded frame re-encodes to the same bytes");
    frames += again;
    pos += r.consumed;
  }
  return frames;
}

// The first frame fed as a prefix of `cut` bytes, then whole, with one
// Progress: the same outcome as decoding it whole without one.
void check_resumed(const ddpx::protocol::FrameDecoder& decoder, const uint8_t* data,
                   size_t size, size_t cut) {
  using Outcome = ddpx::protocol::FrameDecoder::Outcome;
  ddpx::protocol::Request whole, resumed;
  auto want = decoder.decode(data, size, &whole);
  ddpx::protocol::FrameDecoder::Progress progress;
  auto first = decoder.decode(data, cut, &resumed, &progress);
  if (first.outcome != Outcome::kNeedMore) return;
  auto got = decoder.decode(data, size, &resumed, &progress);
  check(got.outcome == want.outcome, "a resumed decode ends as a whole one");
  if (got.outcome == Outcome::kComplete) {
    check(got.consumed == want.consumed, "a resumed decode consumes as a whole one");
    check(ddpx::protocol::encode_request(resumed) == ddpx::protocol::encode_request(whole),
          "a resumed decode finds the same request");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ddpx::protocol::FrameDecoder default_limit;
  static const ddpx::protocol::FrameDecoder small_limit(64);
  decode_stream(default_limit, data, size);
  decode_stream(small_limit, data, size);
  if (size > 1) check_resumed(default_limit, data, size, size / 2);
  return 0;
}
