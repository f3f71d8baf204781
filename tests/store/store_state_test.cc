// The server's data and reply queue without the event loop: waits counted
// per registration across slices, replies queued by reference, the output
// budget, and a queue drained through a real socket in small pieces.
#include "store/store_state.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/protocol.h"
#include "store/reply_queue.h"

namespace ddpx {
namespace {

using protocol::FrameDecoder;
using protocol::QueryType;
using protocol::RequestFields;

// Encodes, decodes and applies one request as the server does; a list
// request longer than one slice is left running in *work.
class Harness {
 public:
  explicit Harness(uint64_t budget = 1ull << 30)
      : state_(&meter_, budget, [this](ClientId id) { woken.push_back(id); }) {}

  absl::Status apply(ClientId client, const RequestFields& fields, ReplyQueue* reply,
                     std::unique_ptr<ListWork>* work) {
    std::string& frame = frames_[client];
    frame = protocol::encode_request(fields);
    protocol::Request r;
    FrameDecoder::Result res =
        decoder_.decode(reinterpret_cast<const uint8_t*>(frame.data()), frame.size(), &r);
    EXPECT_EQ(res.outcome, FrameDecoder::Outcome::kComplete) << res.error;
    return state_.apply(client, r, frame.data(), reply, work);
  }
  absl::Status resume(ClientId client, ReplyQueue* reply, std::unique_ptr<ListWork>* work) {
    return state_.resume(client, frames_[client].data(), reply, work);
  }

  MemoryMeter meter_;
  std::vector<ClientId> woken;
  StoreState state_;

 private:
  FrameDecoder decoder_;
  // The latest request of each client; a running list request views into
  // its client's frame (map nodes do not move).
  std::map<ClientId, std::string> frames_;
};

RequestFields request(QueryType type, std::vector<std::string> keys,
                      std::vector<std::string> values = {}) {
  RequestFields f;
  f.type = type;
  f.keys = std::move(keys);
  f.values = std::move(values);
  return f;
}

// Everything a queue sends, drained through a socket pair whose buffers
// are small, so sends are partial.
std::string drain(ReplyQueue* queue) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  int small = 4096;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  std::string got;
  char buf[1000];
  while (!queue->empty()) {
    int err = queue->send_to(fds[0]);
    EXPECT_TRUE(err == 0 || err == EAGAIN) << err;
    ssize_t n;
    while ((n = read(fds[1], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  close(fds[1]);
  return got;
}

TEST(StoreState, AKeyNamedManyTimesWithAnotherWaiterBetweenSlicesReleasesEachOnce) {
  Harness h;
  ReplyQueue a_reply(&h.meter_), b_reply(&h.meter_), c_reply(&h.meter_);
  std::unique_ptr<ListWork> a_work, b_work, c_work;
  // Client 1 waits on "k" named 3000 times: three slices.
  ASSERT_TRUE(h.apply(1, request(QueryType::kWait, std::vector<std::string>(3000, "/k")),
                      &a_reply, &a_work).ok());
  ASSERT_NE(a_work, nullptr);
  // Client 2 registers on "k" between client 1's slices.
  ASSERT_TRUE(h.apply(2, request(QueryType::kWait, {"/k"}), &b_reply, &b_work).ok());
  while (a_work) ASSERT_TRUE(h.resume(1, &a_reply, &a_work).ok());
  EXPECT_TRUE(a_reply.empty());  // still waiting
  // Creating "k" releases both, each exactly once.
  ASSERT_TRUE(h.apply(3, request(QueryType::kSet, {"/k"}, {"v"}), &c_reply, &c_work).ok());
  std::vector<ClientId> woken = h.woken;
  std::sort(woken.begin(), woken.end());
  EXPECT_EQ(woken, (std::vector<ClientId>{1, 2}));
  EXPECT_FALSE(h.state_.is_waiting(1));
  EXPECT_FALSE(h.state_.is_waiting(2));
  EXPECT_EQ(h.state_.num_waiting_clients(), 0u);
}

TEST(StoreState, AKeyNamedAgainLaterIsCountedOffTwiceAndASetThenDeletedKeyCounts) {
  Harness h;
  ReplyQueue reply(&h.meter_), other(&h.meter_);
  std::unique_ptr<ListWork> work, other_work;
  ASSERT_TRUE(h.apply(1, request(QueryType::kWait, {"/a", "/b", "/a"}), &reply, &work).ok());
  ASSERT_EQ(work, nullptr);
  // "/b" appears and is deleted again: counted, as torch's servers count it.
  ASSERT_TRUE(h.apply(2, request(QueryType::kSet, {"/b"}, {"1"}), &other, &other_work).ok());
  ASSERT_TRUE(h.apply(2, request(QueryType::kDeleteKey, {"/b"}), &other, &other_work).ok());
  EXPECT_TRUE(h.woken.empty());
  // "/a" was registered twice; its creation counts off both.
  ASSERT_TRUE(h.apply(2, request(QueryType::kSet, {"/a"}, {"1"}), &other, &other_work).ok());
  EXPECT_EQ(h.woken, std::vector<ClientId>{1});
  EXPECT_EQ(h.state_.num_waiting_clients(), 0u);
}

TEST(StoreState, WaitsCostTheirKeysAndReturnEveryByteWhenCancelledOrReleased) {
  Harness h;
  const uint64_t empty = h.meter_.used();
  ReplyQueue a(&h.meter_), b(&h.meter_), setter(&h.meter_);
  std::unique_ptr<ListWork> a_work, b_work, s_work;
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) keys.push_back("/key-of-some-length-" + std::to_string(i));
  uint64_t key_bytes = 0;
  for (const auto& k : keys) key_bytes += k.size();
  ASSERT_TRUE(h.apply(1, request(QueryType::kWait, keys), &a, &a_work).ok());
  while (a_work) ASSERT_TRUE(h.resume(1, &a, &a_work).ok());
  // A second waiter on a few of the same keys.
  ASSERT_TRUE(h.apply(2, request(QueryType::kWait, {keys[0], keys[4999]}), &b, &b_work).ok());
  const uint64_t held = h.meter_.used() - empty;
  EXPECT_GE(held, key_bytes);
  EXPECT_LE(held, key_bytes + keys.size() * 32 + 4096) << held / keys.size() << " per key";
  // Client 1 leaves: all of its share comes back; client 2 still waits.
  h.state_.forget(1);
  EXPECT_LE(h.meter_.used() - empty, 1024u);
  EXPECT_TRUE(h.state_.is_waiting(2));
  ASSERT_TRUE(h.apply(3, request(QueryType::kMultiSet, {keys[0], keys[4999]}, {"x", "y"}),
                      &setter, &s_work).ok());
  EXPECT_EQ(h.woken, std::vector<ClientId>{2});
  EXPECT_EQ(h.state_.num_waiting_clients(), 0u);
}

TEST(StoreState, AKeyCreatedBetweenSlicesOfAWaitDoesNotReleaseItEarly) {
  Harness h;
  ReplyQueue reply(&h.meter_), other(&h.meter_);
  std::unique_ptr<ListWork> work, other_work;
  std::vector<std::string> keys = {"/first"};
  for (int i = 0; i < 2000; ++i) keys.push_back("/later" + std::to_string(i));
  ASSERT_TRUE(h.apply(1, request(QueryType::kWait, keys), &reply, &work).ok());
  ASSERT_NE(work, nullptr);
  // "/first" (registered in the first slice) appears before the rest are
  // registered: no wake-up yet.
  ASSERT_TRUE(h.apply(2, request(QueryType::kSet, {"/first"}, {"1"}), &other, &other_work).ok());
  EXPECT_TRUE(h.woken.empty());
  while (work) ASSERT_TRUE(h.resume(1, &reply, &work).ok());
  EXPECT_TRUE(reply.empty());
  std::vector<std::string> values(keys.size() - 1, "x");
  std::vector<std::string> rest(keys.begin() + 1, keys.end());
  ASSERT_TRUE(h.apply(2, request(QueryType::kMultiSet, rest, values), &other, &other_work).ok());
  while (other_work) ASSERT_TRUE(h.resume(2, &other, &other_work).ok());
  EXPECT_EQ(h.woken, std::vector<ClientId>{1});
}

TEST(StoreState, MultiGetQueuesReferencesAndTheBudgetRefusesAWholeReply) {
  Harness h(/*budget=*/10 << 20);
  ReplyQueue setup(&h.meter_);
  std::unique_ptr<ListWork> work;
  const std::string big(1 << 20, 'b');
  ASSERT_TRUE(h.apply(1, request(QueryType::kSet, {"/big"}, {big}), &setup, &work).ok());
  const uint64_t stored = h.meter_.used();

  // 8 copies fit in 10 MiB: queued as references, not copies.
  ReplyQueue reply(&h.meter_);
  ASSERT_TRUE(h.apply(2, request(QueryType::kMultiGet, std::vector<std::string>(8, "/big")),
                      &reply, &work).ok());
  EXPECT_EQ(work, nullptr);
  EXPECT_EQ(reply.owed(), 8 * (8 + big.size()));
  EXPECT_LT(h.meter_.used(), stored + 4096);
  std::string want;
  for (int i = 0; i < 8; ++i) protocol::FrameWriter(&want).bytes(big);
  EXPECT_EQ(drain(&reply), want);
  EXPECT_EQ(h.meter_.used(), stored);

  // 16 do not: refused, and nothing of the reply is queued.
  absl::Status s = h.apply(2, request(QueryType::kMultiGet, std::vector<std::string>(16, "/big")),
                           &reply, &work);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("exceeds the output budget of 10485760"), std::string::npos) << s;
  EXPECT_TRUE(reply.empty());
  EXPECT_EQ(h.meter_.used(), stored);
}

TEST(StoreState, AValueHeldByAReplyIsReplacedNotOverwritten) {
  Harness h;
  ReplyQueue reply(&h.meter_), writer(&h.meter_);
  std::unique_ptr<ListWork> work;
  const std::string first(4096, '1'), second(4096, '2');
  ASSERT_TRUE(h.apply(1, request(QueryType::kSet, {"/v"}, {first}), &writer, &work).ok());
  ASSERT_TRUE(h.apply(2, request(QueryType::kGet, {"/v"}), &reply, &work).ok());
  ASSERT_TRUE(h.apply(1, request(QueryType::kSet, {"/v"}, {second}), &writer, &work).ok());
  ASSERT_TRUE(h.apply(1, request(QueryType::kAppend, {"/v"}, {"+"}), &writer, &work).ok());
  std::string want;
  protocol::FrameWriter(&want).bytes(first);
  EXPECT_EQ(drain(&reply), want);  // the GET's answer, as it was then
  ReplyQueue later(&h.meter_);
  ASSERT_TRUE(h.apply(2, request(QueryType::kGet, {"/v"}), &later, &work).ok());
  want.clear();
  protocol::FrameWriter(&want).bytes(second + "+");
  EXPECT_EQ(drain(&later), want);
}

TEST(ReplyQueue, BytesAndReferencesGoOutInOrderThroughPartialSends) {
  MemoryMeter meter;
  ReplyQueue queue(&meter), pending(&meter);
  auto value = std::make_shared<StoredValue>(&meter, std::string(50000, 'v'));
  const uint64_t value_bytes = meter.used();
  queue.u8(1);
  queue.value(value);
  queue.u32(0xabcdef01);
  pending.bytes("small");
  pending.value(value);
  queue.splice(&pending);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(value.use_count(), 3);

  std::string want;
  protocol::FrameWriter(&want).u8(1).bytes(value->bytes()).u32(0xabcdef01).bytes("small").bytes(
      value->bytes());
  EXPECT_EQ(queue.owed(), want.size());
  EXPECT_EQ(drain(&queue), want);
  EXPECT_EQ(value.use_count(), 1);  // references dropped once sent
  EXPECT_EQ(meter.used(), value_bytes);
}

}  // namespace
}  // namespace ddpx
