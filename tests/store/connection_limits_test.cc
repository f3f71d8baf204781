// Connections that hold the server without using it: one that never sends
// VALIDATE is closed after the handshake timeout, and one address may hold
// only so many connections open. Clients that validate at once (torch's and
// ours) are unaffected, however long they then stay idle.
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/protocol.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/sanitizers.h"
#include "tests/store/raw_client.h"

namespace ddpx {
namespace {

using protocol::FrameWriter;
using protocol::QueryType;
using std::chrono::milliseconds;
using store_test::RawClient;
using Clock = std::chrono::steady_clock;

std::unique_ptr<TCPStoreServer> start(TCPStoreServerOptions options) {
  options.port = 0;
  options.log_drops = false;
  auto s = TCPStoreServer::start(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// True when the client, validated or not, gets its PING answered.
bool answers_ping(RawClient* c, uint32_t nonce) {
  std::string f, echo;
  FrameWriter(&f).query(QueryType::kPing).u32(nonce);
  FrameWriter(&echo).u32(nonce);
  return c->send_bytes(f) && c->read_exactly(4, milliseconds(10000)) == echo;
}

TEST(ConnectionLimits, DefaultsBoundWithRoomForLargeLocalJobs) {
  TCPStoreServerOptions defaults;
  EXPECT_GE(defaults.validate_timeout, milliseconds(1000));
  EXPECT_LE(defaults.validate_timeout, milliseconds(60000));
  EXPECT_GE(defaults.max_connections_per_address, 4096u);
  auto server = start(defaults);
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->stats().max_connections_per_address, 0u);
}

TEST(ConnectionLimits, AConnectionThatNeverValidatesIsClosedAfterTheHandshakeTimeout) {
  TCPStoreServerOptions options;
  options.validate_timeout = milliseconds(300);
  auto server = start(options);
  ASSERT_NE(server, nullptr);

  RawClient validated(server->port());
  validated.validate();
  const auto start_time = Clock::now();
  RawClient silent(server->port());
  RawClient partial(server->port());
  ASSERT_TRUE(partial.send_bytes(std::string(1, static_cast<char>(QueryType::kValidate))));
  EXPECT_TRUE(silent.closed_by_server(milliseconds(10000)));
  EXPECT_GE(Clock::now() - start_time, milliseconds(250));
  EXPECT_TRUE(partial.closed_by_server(milliseconds(10000)));
  EXPECT_NE(server->stats().last_drop_reason.find("no VALIDATE within 300 ms"),
            std::string::npos)
      << server->stats().last_drop_reason;
  EXPECT_EQ(server->stats().dropped, 2u);
  // Validated in time, then idle past the timeout: still served.
  EXPECT_TRUE(answers_ping(&validated, 1));
  // Our client (VALIDATE first, as torch's) idles past it and is served too.
  TCPStoreOptions copts;
  copts.port = server->port();
  auto client = TCPStore::create("127.0.0.1", copts);
  ASSERT_TRUE(client.ok()) << client.status();
  std::this_thread::sleep_for(milliseconds(600));
  ASSERT_TRUE((*client)->set("k", "v").ok());
  EXPECT_EQ(*(*client)->get_string("k"), "v");
  EXPECT_EQ(server->stats().dropped, 2u);
}

TEST(ConnectionLimits, OneAddressHoldsAtMostTheLimitAndOthersAreNotAffected) {
  TCPStoreServerOptions options;
  options.max_connections_per_address = 8;
  auto server = start(options);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->stats().max_connections_per_address, 8u);

  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawClient>(server->port()));
    held.back()->validate();
    ASSERT_TRUE(answers_ping(held.back().get(), i)) << i;
  }
  // The ninth from 127.0.0.1 is closed at once; the eight keep working.
  RawClient ninth(server->port());
  ninth.validate();
  EXPECT_TRUE(ninth.closed_by_server(milliseconds(10000)));
  EXPECT_EQ(server->stats().refused, 1u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(answers_ping(held[i].get(), 100 + i)) << i;

  // Another address is counted on its own.
  RawClient other(server->port(), "127.0.0.2");
  ASSERT_TRUE(other.connected());
  other.validate();
  EXPECT_TRUE(answers_ping(&other, 7));

  // A closed connection frees its place.
  held[0]->close_now();
  bool admitted = false;
  for (int i = 0; i < 200 && !admitted; ++i) {  // until the server sees the close
    RawClient again(server->port());
    again.validate();
    admitted = answers_ping(&again, 9);
    if (!admitted) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(admitted);
  EXPECT_EQ(server->stats().dropped, 0u);
}

// Many clients of one local job, each validating first as torch's do, all
// within the default limit.
TEST(ConnectionLimits, AThousandValidatingClientsFromOneAddressAreServed) {
  auto server = start({});
  ASSERT_NE(server, nullptr);
  const int clients =
      std::min<int>(1000, static_cast<int>(server->stats().max_connections_per_address) - 8);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < clients; ++i) {
    held.push_back(std::make_unique<RawClient>(server->port()));
    held.back()->validate();
  }
  for (int i = 0; i < clients; ++i) ASSERT_TRUE(answers_ping(held[i].get(), i)) << i;
  EXPECT_EQ(server->stats().refused, 0u);
  EXPECT_EQ(server->stats().dropped, 0u);
}

}  // namespace
}  // namespace ddpx
