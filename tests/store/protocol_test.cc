#include "store/protocol.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace ddpx {
namespace protocol {
namespace {

using Outcome = FrameDecoder::Outcome;

std::string from_hex(const std::string& hex) { return absl::HexStringToBytes(hex); }

FrameDecoder::Result decode(const FrameDecoder& d, const std::string& bytes, Request* r) {
  return d.decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), r);
}

std::vector<RequestFields> one_of_each() {
  std::vector<RequestFields> out;
  auto make = [&](QueryType t) -> RequestFields& {
    out.emplace_back();
    out.back().type = t;
    return out.back();
  };
  make(QueryType::kValidate).magic = kValidationMagic;
  make(QueryType::kPing).nonce = 0xdeadbeef;
  RequestFields& set = make(QueryType::kSet);
  set.keys = {"/key"};
  set.values = {std::string("v\0al", 4)};
  RequestFields& cas = make(QueryType::kCompareSet);
  cas.keys = {"/k"};
  cas.values = {"old", "new"};
  make(QueryType::kGet).keys = {"/k"};
  RequestFields& add = make(QueryType::kAdd);
  add.keys = {"/counter"};
  add.delta = -7;
  make(QueryType::kCheck).keys = {"/a", "/b"};
  make(QueryType::kWait).keys = {"/a", "", "/c"};
  make(QueryType::kGetNumKeys);
  make(QueryType::kDeleteKey).keys = {"/k"};
  RequestFields& app = make(QueryType::kAppend);
  app.keys = {"/log"};
  app.values = {"tail"};
  make(QueryType::kMultiGet).keys = {"/x", "/y"};
  RequestFields& ms = make(QueryType::kMultiSet);
  ms.keys = {"/x", "/y"};
  ms.values = {"1", ""};
  make(QueryType::kCancelWait);
  return out;
}

TEST(FrameDecoder, EveryQueryTypeRoundTripsWhateverPiecesItArrivesIn) {
  FrameDecoder decoder;
  for (const RequestFields& want : one_of_each()) {
    SCOPED_TRACE(query_type_name(want.type));
    std::string bytes = encode_request(want);
    // Every proper prefix asks for more, and never for fewer bytes than it has.
    for (size_t n = 0; n < bytes.size(); ++n) {
      Request got;
      FrameDecoder::Result r = decode(decoder, bytes.substr(0, n), &got);
      ASSERT_EQ(r.outcome, Outcome::kNeedMore) << "prefix " << n;
      EXPECT_GT(r.need_at_least, n);
      EXPECT_LE(r.need_at_least, bytes.size());
    }
    Request decoded;
    const std::string stream = bytes + "trailing";
    FrameDecoder::Result r = decode(decoder, stream, &decoded);
    ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
    EXPECT_EQ(r.consumed, bytes.size());
    RequestFields got = to_fields(decoded);
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.magic, want.magic);
    EXPECT_EQ(got.nonce, want.nonce);
    EXPECT_EQ(got.delta, want.delta);
    EXPECT_EQ(got.keys, want.keys);
    EXPECT_EQ(got.values, want.values);
  }
}

// Frames captured on the wire from torch 2.15's TCPStore client.
TEST(FrameDecoder, DecodesFramesAsTorchSendsThem) {
  FrameDecoder decoder;
  Request r;
  // VALIDATE + PING, sent in one write right after connecting.
  std::string hello = from_hex("00cef7853c0d64150000");
  FrameDecoder::Result res = decode(decoder, hello, &r);
  ASSERT_EQ(res.outcome, Outcome::kComplete);
  EXPECT_EQ(r.type, QueryType::kValidate);
  EXPECT_EQ(r.magic, kValidationMagic);
  res = decode(decoder, hello.substr(res.consumed), &r);
  ASSERT_EQ(res.outcome, Outcome::kComplete);
  EXPECT_EQ(r.type, QueryType::kPing);
  EXPECT_EQ(r.nonce, 0x1564u);

  // Decoded strings view into the frame, so it must outlive them.
  const std::string set = from_hex("0102000000000000002f6b010000000000000076");
  ASSERT_EQ(decode(decoder, set, &r).outcome, Outcome::kComplete);
  EXPECT_EQ(r.type, QueryType::kSet);
  EXPECT_EQ(r.key, "/k");
  EXPECT_EQ(r.value, "v");

  ASSERT_EQ(decode(decoder, from_hex("0402000000000000002f630500000000000000"), &r).outcome,
            Outcome::kComplete);
  EXPECT_EQ(r.type, QueryType::kAdd);
  EXPECT_EQ(r.delta, 5);

  const std::string multi_set =
      from_hex("0b020000000000000003000000000000002f6d3101000000000000003103"
               "000000000000002f6d32010000000000000032");
  ASSERT_EQ(decode(decoder, multi_set, &r).outcome, Outcome::kComplete);
  EXPECT_EQ(r.type, QueryType::kMultiSet);
  EXPECT_EQ(to_fields(r).keys, (std::vector<std::string>{"/m1", "/m2"}));
  EXPECT_EQ(to_fields(r).values, (std::vector<std::string>{"1", "2"}));

  // And we encode exactly those bytes.
  EXPECT_EQ(encode_request(r), from_hex("0b020000000000000003000000000000002f6d310100000000"
                                        "0000003103000000000000002f6d32010000000000000032"));
}

// Decoded strings are views into the frame: a 1 MiB value is not copied.
TEST(FrameDecoder, StringsAreViewsIntoTheFrame) {
  FrameDecoder decoder;
  RequestFields big;
  big.type = QueryType::kSet;
  big.keys = {"/big"};
  big.values = {std::string(1 << 20, 'b')};
  const std::string bytes = encode_request(big);
  Request r;
  ASSERT_EQ(decode(decoder, bytes, &r).outcome, Outcome::kComplete);
  EXPECT_EQ(r.value.data(), bytes.data() + bytes.size() - (1 << 20));
  EXPECT_EQ(r.value.size(), size_t{1} << 20);
}

// A key list arriving in pieces is checked once: with a Progress, each call
// starts where the last stopped. The proof: bytes already checked are
// overwritten with an impossible length, and the decoder never notices.
TEST(FrameDecoder, AListArrivingInPiecesIsCheckedOnce) {
  FrameDecoder decoder;
  RequestFields wait;
  wait.type = QueryType::kWait;
  for (int i = 0; i < 1000; ++i) wait.keys.push_back("/key" + std::to_string(i));
  std::string bytes = encode_request(wait);
  FrameDecoder::Progress progress;
  Request r;
  const size_t half = bytes.size() / 2;
  FrameDecoder::Result res = decode(decoder, bytes.substr(0, half), &r);
  ASSERT_EQ(res.outcome, Outcome::kNeedMore);
  res = decoder.decode(reinterpret_cast<const uint8_t*>(bytes.data()), half, &r, &progress);
  ASSERT_EQ(res.outcome, Outcome::kNeedMore);
  EXPECT_GT(progress.list_pos, 9u);
  EXPECT_LT(progress.entries_left, 1000u);
  EXPECT_GT(progress.entries_left, 0u);
  // Corrupt the first key's length prefix (already checked).
  std::string corrupt = bytes;
  for (int i = 0; i < 8; ++i) corrupt[9 + i] = '\xff';
  res = decoder.decode(reinterpret_cast<const uint8_t*>(corrupt.data()), corrupt.size(), &r,
                       &progress);
  ASSERT_EQ(res.outcome, Outcome::kComplete) << res.error;
  EXPECT_EQ(res.consumed, bytes.size());
  EXPECT_EQ(r.count, 1000u);
  EXPECT_EQ(progress.list_pos, 0u);  // reset for the next frame
  // Without the Progress the same bytes are refused: the check is real.
  EXPECT_EQ(decode(decoder, corrupt, &r).outcome, Outcome::kMalformed);
}

TEST(FrameDecoder, RejectsUnknownQueryTypesNamingTheByte) {
  FrameDecoder decoder;
  Request r;
  for (uint8_t type : {uint8_t{14}, uint8_t{0x2a}, uint8_t{0xff}}) {
    FrameDecoder::Result res = decode(decoder, std::string(1, static_cast<char>(type)), &r);
    EXPECT_EQ(res.outcome, Outcome::kMalformed);
    char want[32];
    std::snprintf(want, sizeof(want), "unknown query type 0x%02x", type);
    EXPECT_EQ(res.error, want);
  }
}

TEST(FrameDecoder, RejectsALengthPastTheLimitBeforeTheDataArrives) {
  FrameDecoder decoder(1024);
  Request r;
  std::string frame;
  FrameWriter(&frame).query(QueryType::kSet).u64(1ull << 40);
  FrameDecoder::Result res = decode(decoder, frame, &r);
  EXPECT_EQ(res.outcome, Outcome::kMalformed);
  EXPECT_NE(res.error.find("SET request: key length 1099511627776 exceeds the limit of 1024"),
            std::string::npos) << res.error;

  // Each piece under the limit, the whole frame over it.
  std::string big;
  FrameWriter(&big).query(QueryType::kSet).bytes(std::string(600, 'k')).u64(600);
  res = decode(decoder, big, &r);
  EXPECT_EQ(res.outcome, Outcome::kMalformed);
  EXPECT_NE(res.error.find("frame longer than the limit"), std::string::npos) << res.error;
}

TEST(FrameDecoder, RejectsAKeyCountPastTheLimit) {
  FrameDecoder decoder(1 << 20);
  Request r;
  std::string frame;
  FrameWriter(&frame).query(QueryType::kWait).u64(~0ull);
  FrameDecoder::Result res = decode(decoder, frame, &r);
  EXPECT_EQ(res.outcome, Outcome::kMalformed);
  EXPECT_NE(res.error.find("WAIT request: key count"), std::string::npos) << res.error;
}

TEST(FrameDecoder, AsksForTheWholeValueOnceItsLengthIsKnown) {
  FrameDecoder decoder;
  Request r;
  std::string header;
  FrameWriter(&header).query(QueryType::kSet).bytes("/k").u64(1 << 20);
  FrameDecoder::Result res = decode(decoder, header + "partial", &r);
  ASSERT_EQ(res.outcome, Outcome::kNeedMore);
  EXPECT_EQ(res.need_at_least, header.size() + (1 << 20));
}

}  // namespace
}  // namespace protocol
}  // namespace ddpx
