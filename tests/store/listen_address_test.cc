// Where a master's in-process server listens: on loopback only when its
// clients reach it through a loopback address, on every interface
// otherwise. Read back from the kernel's socket tables (/proc/net/tcp{,6}),
// as `ss -ltn` shows them.
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/socket_util.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

// The local addresses (hex, as /proc/net/tcp{,6} writes them) of the sockets
// listening on `port`, each prefixed "4:" or "6:" for its table.
std::vector<std::string> listening_on(uint16_t port) {
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
      found.push_back(absl::StrCat(table[13] == '6' ? "6:" : "4:", local.substr(0, colon)));
    }
  }
  return found;
}

constexpr char kLoopbackV4[] = "4:0100007F";  // 127.0.0.1, little-endian hex
constexpr char kAnyV6[] = "6:00000000000000000000000000000000";
constexpr char kAnyV4[] = "4:00000000";

std::unique_ptr<TCPStore> master_at(const std::string& host) {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.timeout = milliseconds(10000);
  auto store = TCPStore::create(host, options);
  EXPECT_TRUE(store.ok()) << host << ": " << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(ListenAddress, LoopbackMasterListensOnLoopbackOnly) {
  auto m = master_at("127.0.0.1");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(listening_on(m->port()), std::vector<std::string>{kLoopbackV4});
  ASSERT_TRUE(m->set("k", "v").ok());
  TCPStoreOptions options;
  options.port = m->port();
  auto c = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*(*c)->get_string("k"), "v");
}

TEST(ListenAddress, LocalhostMasterListensOnLoopbackAndClientsReachIt) {
  auto m = master_at("localhost");
  ASSERT_NE(m, nullptr);
  const std::vector<std::string> listening = listening_on(m->port());
  ASSERT_EQ(listening.size(), 1u);
  EXPECT_TRUE(listening[0] == kLoopbackV4 ||
              listening[0] == "6:00000000000000000000000001000000")  // ::1
      << listening[0];
  TCPStoreOptions options;
  options.port = m->port();
  auto c = TCPStore::create("localhost", options);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->set("k", "v").ok());
  EXPECT_EQ(*m->get_string("k"), "v");
}

TEST(ListenAddress, WhichHostsCountAsLoopback) {
  EXPECT_EQ(loopback_listen_host("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(loopback_listen_host("127.3.2.1"), "127.3.2.1");
  EXPECT_EQ(loopback_listen_host("::1"), "::1");
  EXPECT_EQ(loopback_listen_host("::ffff:127.0.0.1"), "::ffff:127.0.0.1");
  EXPECT_EQ(loopback_listen_host("LocalHost"), "127.0.0.1");
  EXPECT_EQ(loopback_listen_host("192.0.2.7"), "");
  EXPECT_EQ(loopback_listen_host("::"), "");
  EXPECT_EQ(loopback_listen_host("0.0.0.0"), "");
  EXPECT_EQ(loopback_listen_host("10.0.0.1"), "");
  // A name other than localhost keeps every interface even where it
  // resolves to loopback (Debian maps a host's own name to 127.0.1.1, while
  // the other machines of a job resolve it to a routable address).
  EXPECT_EQ(loopback_listen_host("trainer-node-1.invalid"), "");
}

// This machine's first IPv4 address that is not loopback, or "".
std::string routable_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const in_addr addr = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
    if ((ntohl(addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr, text, sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(ListenAddress, RoutableMasterListensOnEveryInterface) {
  const std::string host = routable_ipv4();
  if (host.empty()) {
    GTEST_SKIP() << "this machine (or the test's sandbox) has no non-loopback IPv4 "
                    "address to start a master on";
  }
  auto m = master_at(host);
  ASSERT_NE(m, nullptr);
  const std::vector<std::string> listening = listening_on(m->port());
  ASSERT_EQ(listening.size(), 1u);
  EXPECT_TRUE(listening[0] == kAnyV6 || listening[0] == kAnyV4) << listening[0];
}

TEST(ListenAddress, AnExplicitServerHostIsKept) {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.server.host = "0.0.0.0";
  auto m = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(listening_on((*m)->port()), std::vector<std::string>{kAnyV4});
}

}  // namespace
}  // namespace ddpx
