// Hostile and broken clients against the epoll server, over raw sockets: each
// is dropped with a reason while a well-behaved client keeps being served.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/protocol.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/store/raw_client.h"

namespace ddpx {
namespace {

using protocol::FrameWriter;
using protocol::QueryType;
using std::chrono::milliseconds;

using store_test::RawClient;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(TCPStoreServerOptions options) {
    options.port = 0;
    auto s = TCPStoreServer::start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    TCPStoreOptions copts;
    copts.port = server_->port();
    copts.timeout = milliseconds(5000);
    auto c = TCPStore::create("127.0.0.1", copts);
    ASSERT_TRUE(c.ok()) << c.status();
    good_ = std::move(*c);
    ASSERT_TRUE(good_->set("alive", "yes").ok());
  }

  // The well-behaved client still gets served, including a wake-up.
  void expect_others_still_served() {
    EXPECT_EQ(*good_->get_string("alive"), "yes");
    std::thread setter([this] {
      auto other = good_->clone();
      ASSERT_TRUE(other.ok());
      ASSERT_TRUE((*other)->set("ping-key", "1").ok());
    });
    EXPECT_TRUE(good_->wait({"ping-key"}).ok());
    setter.join();
    ASSERT_TRUE(good_->delete_key("ping-key").ok());
  }

  void expect_dropped_for(const std::string& reason_part) {
    // The drop is recorded by the loop thread; allow it a moment.
    for (int i = 0; i < 200; ++i) {
      if (server_->stats().last_drop_reason.find(reason_part) != std::string::npos) break;
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_NE(server_->stats().last_drop_reason.find(reason_part), std::string::npos)
        << server_->stats().last_drop_reason;
  }

  std::unique_ptr<TCPStoreServer> server_;
  std::unique_ptr<TCPStore> good_;
};

TEST_F(FaultTest, UnknownQueryTypeDropsOnlyThatClient) {
  RawClient bad(server_->port());
  bad.validate();
  bad.send_bytes(std::string(1, '\x2a'));
  EXPECT_TRUE(bad.closed_by_server(milliseconds(2000)));
  expect_dropped_for("unknown query type 0x2a");
  expect_others_still_served();
}

TEST_F(FaultTest, LengthPastTheLimitIsRejectedWithoutAllocatingIt) {
  RawClient bad(server_->port());
  bad.validate();
  std::string f;
  FrameWriter(&f).query(QueryType::kSet).u64(1ull << 40);
  bad.send_bytes(f);
  EXPECT_TRUE(bad.closed_by_server(milliseconds(2000)));
  expect_dropped_for("key length 1099511627776 exceeds the limit of 268435456");
  expect_others_still_served();
}

TEST_F(FaultTest, ConfiguredLimitApplies) {
  TCPStoreServerOptions options;
  options.max_frame_length = 4096;
  options.log_drops = false;
  start(options);
  RawClient bad(server_->port());
  bad.validate();
  std::string f;
  FrameWriter(&f).query(QueryType::kSet).bytes("/k").bytes(std::string(5000, 'x'));
  bad.send_bytes(f);
  EXPECT_TRUE(bad.closed_by_server(milliseconds(2000)));
  expect_dropped_for("exceeds the limit of 4096");
  expect_others_still_served();
}

TEST_F(FaultTest, RequestBeforeValidateAndBadMagicAreRefused) {
  RawClient no_hello(server_->port());
  std::string get;
  FrameWriter(&get).query(QueryType::kGet).bytes("/alive");
  no_hello.send_bytes(get);
  EXPECT_TRUE(no_hello.closed_by_server(milliseconds(2000)));
  expect_dropped_for("GET request before VALIDATE");

  RawClient wrong_magic(server_->port());
  std::string f;
  FrameWriter(&f).query(QueryType::kValidate).u32(0x12345678);
  wrong_magic.send_bytes(f);
  EXPECT_TRUE(wrong_magic.closed_by_server(milliseconds(2000)));
  expect_dropped_for("magic 0x12345678");
  expect_others_still_served();
}

TEST_F(FaultTest, DisconnectMidFrameIsLoggedAndForgotten) {
  {
    RawClient bad(server_->port());
    bad.validate();
    std::string f;
    FrameWriter(&f).query(QueryType::kSet).bytes("/half").u64(100).u32(7);
    bad.send_bytes(f);
    std::this_thread::sleep_for(milliseconds(20));
  }
  expect_dropped_for("disconnected mid-frame");
  EXPECT_FALSE(*good_->check({"half"}));
  expect_others_still_served();
}

TEST_F(FaultTest, DisconnectMidWaitLeavesNoDanglingWaiter) {
  {
    RawClient bad(server_->port());
    bad.validate();
    std::string f;
    FrameWriter(&f).query(QueryType::kWait).u64(1).bytes("/later");
    bad.send_bytes(f);
    std::this_thread::sleep_for(milliseconds(20));
  }
  expect_dropped_for("disconnected while waiting");
  // Setting the key the dead client waited on wakes nobody and breaks nothing.
  ASSERT_TRUE(good_->set("later", "x").ok());
  expect_others_still_served();
}

TEST_F(FaultTest, ClientThatNeverReadsIsDroppedBeforeItsRepliesPileUp) {
  TCPStoreServerOptions options;
  options.max_pending_output = 1 << 20;
  options.log_drops = false;
  start(options);
  ASSERT_TRUE(good_->set("big", Bytes(256 << 10, 7)).ok());
  RawClient greedy(server_->port());
  greedy.validate();
  std::string gets;
  for (int i = 0; i < 64; ++i) FrameWriter(&gets).query(QueryType::kGet).bytes("/big");
  greedy.send_bytes(gets);  // 16 MiB of replies it never reads
  expect_dropped_for("not reading its responses");
  expect_others_still_served();
}

TEST_F(FaultTest, AClientPipeliningWaitThenSetWakesItself) {
  RawClient self(server_->port());
  self.validate();
  std::string f;
  FrameWriter(&f)
      .query(QueryType::kWait).u64(1).bytes("/mine")
      .query(QueryType::kSet).bytes("/mine").bytes("1")
      .query(QueryType::kPing).u32(99);
  self.send_bytes(f);
  std::string reply = self.read_exactly(5, milliseconds(2000));
  ASSERT_EQ(reply.size(), 5u);
  EXPECT_EQ(reply[0], static_cast<char>(protocol::WaitResponse::kStopWaiting));
  EXPECT_EQ(protocol::read_u32(reinterpret_cast<const uint8_t*>(reply.data() + 1)), 99u);
  EXPECT_EQ(server_->stats().dropped, 0u);
  expect_others_still_served();
}

// torch's libuv server sends STOP_WAITING before the reply of the request
// that released the wait; so do we (torch_interop_test compares the bytes).
TEST_F(FaultTest, StopWaitingComesBeforeTheReplyOfTheRequestThatReleasedIt) {
  RawClient self(server_->port());
  self.validate();
  std::string f;
  FrameWriter(&f)
      .query(QueryType::kWait).u64(1).bytes("/cas")
      .query(QueryType::kCompareSet).bytes("/cas").bytes("").bytes("v")
      .query(QueryType::kAdd).bytes("/n").i64(1);
  FrameWriter(&f)
      .query(QueryType::kWait).u64(1).bytes("/added")
      .query(QueryType::kAdd).bytes("/added").i64(5);
  self.send_bytes(f);
  const char stop = static_cast<char>(protocol::WaitResponse::kStopWaiting);
  std::string want;
  FrameWriter(&want).u8(static_cast<uint8_t>(stop)).bytes("v").i64(1);
  FrameWriter(&want).u8(static_cast<uint8_t>(stop)).i64(5);
  EXPECT_EQ(self.read_exactly(want.size(), milliseconds(2000)), want);
  EXPECT_EQ(server_->stats().dropped, 0u);
}

TEST_F(FaultTest, GarbageFromManyClientsAtOnce) {
  std::vector<std::unique_ptr<RawClient>> bad;
  for (int i = 0; i < 32; ++i) {
    bad.push_back(std::make_unique<RawClient>(server_->port()));
    std::string junk(64, static_cast<char>(0x80 + i));
    bad.back()->send_bytes(junk);
  }
  for (auto& b : bad) EXPECT_TRUE(b->closed_by_server(milliseconds(2000)));
  EXPECT_GE(server_->stats().dropped, 32u);
  expect_others_still_served();
}

// Resolving and binding (store/socket_util.h's resolve_tcp and
// first_usable_socket, shared by the client and the server): each failure
// is named, with the code callers act on.
TEST(Addresses, ClientNamesAHostThatDoesNotResolve) {
  TCPStoreOptions options;
  options.port = 1;
  options.timeout = milliseconds(300);
  auto c = TCPStore::create("no-such-host.invalid", options);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("cannot resolve store host 'no-such-host.invalid'"),
            std::string::npos)
      << c.status();
}

TEST(Addresses, ServerNamesAHostThatDoesNotResolve) {
  TCPStoreServerOptions options;
  options.host = "no-such-host.invalid";
  auto s = TCPStoreServer::start(options);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("store server: cannot resolve host 'no-such-host.invalid'"),
            std::string::npos)
      << s.status();
}

TEST(Addresses, ServerNamesAPortInUse) {
  TCPStoreServerOptions options;
  options.host = "127.0.0.1";
  auto first = TCPStoreServer::start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.port = (*first)->port();
  auto second = TCPStoreServer::start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_NE(second.status().message().find(
                absl::StrCat("store server: bind/listen on 127.0.0.1:", options.port)),
            std::string::npos)
      << second.status();
}

TEST(Addresses, ClientAndServerMeetOnTheWildcardAndOnIpv4) {
  for (const std::string& host : {std::string(), std::string("127.0.0.1")}) {
    TCPStoreServerOptions options;
    options.host = host;
    auto server = TCPStoreServer::start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    TCPStoreOptions copts;
    copts.port = (*server)->port();
    copts.timeout = milliseconds(5000);
    auto c = TCPStore::create("localhost", copts);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->set("k", "v").ok());
    EXPECT_EQ(*(*c)->get_string("k"), "v");
  }
}

}  // namespace
}  // namespace ddpx
