// TCPStore client against the in-process epoll server, over real sockets.
#include "store/tcp_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "examples/launcher/launcher.h"
#include "store/socket_util.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<TCPStore> master(milliseconds timeout = milliseconds(5000)) {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.timeout = timeout;
  auto store = TCPStore::create("127.0.0.1", options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

std::unique_ptr<TCPStore> client(uint16_t port, milliseconds timeout = milliseconds(5000)) {
  TCPStoreOptions options;
  options.port = port;
  options.timeout = timeout;
  auto store = TCPStore::create("127.0.0.1", options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// A port nobody listens on right now, outside the ephemeral range.
uint16_t free_port() { return static_cast<uint16_t>(launcher::pick_free_port()); }

TEST(TCPStore, EveryOperation) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  auto c = client(m->port());
  ASSERT_NE(c, nullptr);

  ASSERT_TRUE(m->set("k", "v").ok());
  EXPECT_EQ(*c->get_string("k"), "v");
  EXPECT_EQ(*c->add("n", 5), 5);
  EXPECT_EQ(*m->add("n", -2), 3);
  // The server rewrites a counter's decimal text in place: longer, shorter,
  // negative, and the extremes (wrapping like two's complement).
  EXPECT_EQ(*m->add("ctr", 100000), 100000);
  EXPECT_EQ(*m->get_string("ctr"), "100000");
  EXPECT_EQ(*m->add("ctr", -100009), -9);
  EXPECT_EQ(*c->get_string("ctr"), "-9");
  EXPECT_EQ(*m->add("ctr", INT64_MAX), INT64_MAX - 9);
  EXPECT_EQ(*m->add("ctr", 10), INT64_MIN);
  EXPECT_EQ(*m->get_string("ctr"), "-9223372036854775808");
  EXPECT_TRUE(*m->delete_key("ctr"));
  EXPECT_EQ(*c->get_string("n"), "3");

  // compare_set, torch semantics.
  EXPECT_EQ(to_string(*c->compare_set("k", to_bytes("v"), to_bytes("w"))), "w");
  EXPECT_EQ(to_string(*c->compare_set("k", to_bytes("nope"), to_bytes("x"))), "w");
  EXPECT_EQ(to_string(*c->compare_set("fresh", {}, to_bytes("d"))), "d");
  EXPECT_EQ(to_string(*c->compare_set("absent", to_bytes("e"), to_bytes("d"))), "e");
  EXPECT_FALSE(*c->check({"absent"}));

  EXPECT_TRUE(*c->check({"k", "n"}));
  EXPECT_FALSE(*c->check({"k", "missing"}));
  EXPECT_EQ(*c->num_keys(), 3);  // k, n, fresh
  EXPECT_TRUE(*c->delete_key("fresh"));
  EXPECT_FALSE(*c->delete_key("fresh"));
  EXPECT_EQ(*m->num_keys(), 2);

  ASSERT_TRUE(c->append("log", to_bytes("a")).ok());
  ASSERT_TRUE(m->append("log", to_bytes("bc")).ok());
  EXPECT_EQ(*c->get_string("log"), "abc");

  ASSERT_TRUE(c->multi_set({"m1", "m2"}, {to_bytes("1"), to_bytes("")}).ok());
  auto values = m->multi_get({"m2", "m1"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(to_string((*values)[0]), "");
  EXPECT_EQ(to_string((*values)[1]), "1");
  EXPECT_EQ(c->multi_set({"a"}, {}).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(c->wait({"m1", "k"}, milliseconds(100)).ok());

  // Binary values survive.
  Bytes binary = {0, 1, 2, 255, 0};
  ASSERT_TRUE(c->set("bin", binary).ok());
  EXPECT_EQ(*m->get("bin"), binary);

  auto cloned = c->clone();
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  EXPECT_EQ(*(*cloned)->get_string("k"), "w");
}

TEST(TCPStore, LargeValuesCrossInManyPieces) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  Bytes big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131);
  ASSERT_TRUE(m->set("big", big).ok());
  auto c = client(m->port());
  auto got = c->get("big");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, big);
}

TEST(TCPStore, GetBlocksUntilAnotherClientSets) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  std::thread setter([port = m->port()] {
    auto c = client(port);
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE(c->set("late", "here").ok());
  });
  auto start = std::chrono::steady_clock::now();
  auto v = m->get_string("late");
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "here");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(40));
}

TEST(TCPStore, ManyWaitersAreWokenByOneSet) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  constexpr int kWaiters = 16;
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, port = m->port()] {
      auto c = client(port);
      if (c->wait({"go", "also"}).ok()) ++released;
    });
  }
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(m->set("go", "1").ok());
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(released.load(), 0);  // "also" is still missing
  ASSERT_TRUE(m->multi_set({"also"}, {to_bytes("1")}).ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(released.load(), kWaiters);
}

TEST(TCPStore, TimeoutNamesTheMissingKeysAndTheStoreStaysUsable) {
  auto m = master(milliseconds(150));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->set("present", "1").ok());
  auto start = std::chrono::steady_clock::now();
  absl::Status s = m->wait({"present", "gone1", "gone2"}, milliseconds(150));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("[gone1, gone2]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("150 ms"), std::string::npos) << s;
  EXPECT_GE(took, milliseconds(150));
  EXPECT_LT(took, milliseconds(2000));

  auto g = m->get("nothing");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(g.status().message().find("[nothing]"), std::string::npos) << g.status();

  // The cancelled wait left the connection in step.
  ASSERT_TRUE(m->set("nothing", "now").ok());
  EXPECT_EQ(*m->get_string("nothing"), "now");
  EXPECT_EQ(*m->add("c", 1), 1);
}

TEST(TCPStore, ClientsMayStartBeforeTheServer) {
  const uint16_t port = free_port();
  std::unique_ptr<TCPStore> early;
  std::thread t([&] { early = client(port, milliseconds(10000)); });
  std::this_thread::sleep_for(milliseconds(300));
  TCPStoreOptions options;
  options.port = port;
  options.is_master = true;
  options.timeout = milliseconds(5000);
  auto m = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(m.ok()) << m.status();
  t.join();
  ASSERT_NE(early, nullptr);
  ASSERT_TRUE(early->set("hello", "world").ok());
  EXPECT_EQ(*(*m)->get_string("hello"), "world");
}

TEST(TCPStore, ConnectGivesUpAtItsTimeoutNamingTheServer) {
  const uint16_t port = free_port();
  TCPStoreOptions options;
  options.port = port;
  options.timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto c = TCPStore::create("127.0.0.1", options);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(port)),
            std::string::npos) << c.status();
  EXPECT_LT(took, milliseconds(1500));
}

TEST(TCPStore, ServerGoingAwayFailsABlockedClientPromptly) {
  auto server = TCPStoreServer::start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = client((*server)->port(), milliseconds(30000));
  ASSERT_NE(c, nullptr);
  absl::Status result;
  auto start = std::chrono::steady_clock::now();
  std::thread waiter([&] { result = c->wait({"never"}); });
  std::this_thread::sleep_for(milliseconds(100));
  (*server)->stop();
  waiter.join();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
  EXPECT_NE(result.message().find("closed the connection"), std::string::npos) << result;
  EXPECT_NE(result.message().find("[never]"), std::string::npos) << result;
  EXPECT_LT(took, milliseconds(5000));
  // Later calls fail at once with the reason too.
  EXPECT_FALSE(c->set("x", "y").ok());
}

TEST(TCPStore, WaitForWorkersCountsEveryClientIn) {
  const uint16_t port = free_port();
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([port] {
      TCPStoreOptions options;
      options.port = port;
      options.num_workers = 3;
      options.timeout = milliseconds(10000);
      auto w = TCPStore::create("127.0.0.1", options);
      ASSERT_TRUE(w.ok()) << w.status();
      EXPECT_EQ((*w)->num_workers(), 3);
    });
  }
  TCPStoreOptions options;
  options.port = port;
  options.is_master = true;
  options.num_workers = 3;
  options.timeout = milliseconds(10000);
  auto m = TCPStore::create("127.0.0.1", options);
  for (auto& t : workers) t.join();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*(*m)->add("init/", 0), 0);  // user keys live under "/"
}

TEST(TCPStore, WaitForWorkersTimesOutSayingHowManyJoined) {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.num_workers = 2;
  options.timeout = milliseconds(200);
  auto m = TCPStore::create("127.0.0.1", options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(m.status().message().find("1/2 joined"), std::string::npos) << m.status();
}

// Like torch's servers (std::stoll): leading white space and sign, then
// digits; what follows them is ignored and replaced by the sum.
TEST(TCPStore, AddUsesTheLeadingDigitsOfAValue) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"12abc", 13}, {" -5x", -4}, {"+7", 8}, {"\t\n 3 4", 4}, {"0012", 13},
      {"9223372036854775806z", 9223372036854775807}};
  for (const auto& [text, want] : cases) {
    ASSERT_TRUE(m->set("n", text).ok());
    EXPECT_EQ(*m->add("n", 1), want) << text;
    EXPECT_EQ(*m->get_string("n"), std::to_string(want)) << text;
  }
}

TEST(TCPStore, AddOnATextValueFailsThatClientOnly) {
  auto m = master();
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->set("text", "hello").ok());
  for (const std::string bad : {"hello", "", "-", "99999999999999999999"}) {
    ASSERT_TRUE(m->set("text", bad).ok());
    auto c = client(m->port());
    auto r = c->add("text", 1);
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_NE(r.status().message().find("does not start with an integer"), std::string::npos)
        << r.status();
    EXPECT_NE(m->server()->stats().last_drop_reason.find("does not start with an int64"),
              std::string::npos) << m->server()->stats().last_drop_reason;
  }
  ASSERT_TRUE(m->set("text", "hello").ok());
  auto c = client(m->port());
  EXPECT_FALSE(c->add("text", 1).ok());
  EXPECT_EQ(*m->get_string("text"), "hello");
  EXPECT_NE(m->server()->stats().last_drop_reason.find("ADD on key '/text'"),
            std::string::npos);
}

}  // namespace
}  // namespace ddpx
