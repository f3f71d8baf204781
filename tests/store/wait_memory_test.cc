// What one WAIT naming millions of missing keys costs a server, from a raw
// socket: the bytes the server accounts for it stay close to the keys'
// bytes, the process's RSS grows by little more than the request itself,
// and both come back when the waiter leaves. Also: the server a master
// TCPStore starts in-process has a memory limit unless told otherwise.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "store/protocol.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/sanitizers.h"
#include "tests/store/raw_client.h"
#include "tests/store/subprocess.h"

namespace ddpx {
namespace {

using protocol::FrameWriter;
using protocol::QueryType;
using std::chrono::milliseconds;
using store_test::RawClient;

constexpr uint64_t kMiB = 1 << 20;
// 2M keys of 8 bytes: a 32 MB frame. Sanitized builds run 10x slower and
// keep freed memory in quarantine: fewer keys, and no RSS checks.
constexpr size_t kKeys = kSanitized ? 200000 : 2000000;
constexpr size_t kKeyBytes = 8;
// What one registration may cost beyond its key's bytes.
constexpr uint64_t kPerKeyBound = 40;

// WAIT on kKeys distinct missing keys, then a PING: its echo comes once the
// whole WAIT is registered.
std::string ping_frame();

std::string wait_then_ping() {
  std::string f;
  f.reserve(kKeys * (8 + kKeyBytes) + 64);
  FrameWriter w(&f);
  w.query(QueryType::kWait).u64(kKeys);
  // In no particular order: a sorted list would be the registry's best case.
  for (size_t i = 0; i < kKeys; ++i) w.bytes(absl::StrFormat("/%07d", (i * 1000003) % kKeys));
  return f + ping_frame();
}

const std::string& frame() {
  static const std::string* f = new std::string(wait_then_ping());
  return *f;
}

std::string ping_frame() {
  std::string f;
  FrameWriter(&f).query(QueryType::kPing).u32(77);
  return f;
}

std::string ping_echo() {
  std::string e;
  FrameWriter(&e).u32(77);
  return e;
}

// Waits until `done` or 120 s (the server walks millions of keys in slices).
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 12000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

TEST(WaitMemory, AMasterServerHasADefaultMemoryLimit) {
  EXPECT_GT(TCPStoreServerOptions().max_memory, 0u);
  EXPECT_EQ(TCPStoreOptions().server.max_memory, TCPStoreServerOptions::kDefaultMaxMemory);
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  auto master = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ((*master)->server()->stats().memory_limit, TCPStoreServerOptions::kDefaultMaxMemory);
  // Adjustable through the options.
  options.server.max_memory = 64 * kMiB;
  auto smaller = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(smaller.ok()) << smaller.status();
  EXPECT_EQ((*smaller)->server()->stats().memory_limit, 64 * kMiB);
}

TEST(WaitMemory, AMillionKeyWaitIsAccountedNearItsKeysAndReturnedWhenTheWaiterLeaves) {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.timeout = milliseconds(60000);
  auto master = TCPStore::create("127.0.0.1", options);
  ASSERT_TRUE(master.ok()) << master.status();
  TCPStoreServer* server = (*master)->server();
  ASSERT_TRUE((*master)->set("alive", "yes").ok());
  const uint64_t before = server->stats().memory_used;

  RawClient waiter((*master)->port());
  waiter.validate();
  ASSERT_TRUE(waiter.send_bytes(frame()));
  ASSERT_EQ(waiter.read_exactly(4, milliseconds(120000)), ping_echo());
  // Registered (the frame itself is released by now): the keys' bytes plus
  // a small bound per key.
  const uint64_t held = server->stats().memory_used - before;
  std::printf("accounted for the wait: %.1f MiB, %.1f bytes per %zu-byte key\n",
              static_cast<double>(held) / kMiB, static_cast<double>(held) / kKeys, kKeyBytes);
  EXPECT_LE(held, kKeys * (kKeyBytes + kPerKeyBound))
      << held / kKeys << " bytes per registered key of " << kKeyBytes << " bytes";
  EXPECT_EQ(*(*master)->get_string("alive"), "yes");

  waiter.close_now();
  EXPECT_TRUE(eventually([&] { return server->stats().memory_used <= before; }))
      << server->stats().memory_used - before << " bytes still held after the waiter left";
  EXPECT_EQ(*(*master)->get_string("alive"), "yes");
}

// VmRSS or VmHWM of a process, in bytes.
uint64_t status_bytes(pid_t pid, const std::string& field) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

TEST(WaitMemory, AMillionKeyWaitGrowsTheServerProcessByLittleMoreThanItsFrame) {
  if (kSanitized) {
    GTEST_SKIP() << "RSS is not the program's under ASan/TSan (shadow memory, freed "
                    "memory kept in quarantine); the plain build runs this test";
  }
  auto server = store_test::Subprocess::spawn(
      {store_test::runfile("store/tcp_store_server"), "--port=0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto line = server->read_line(milliseconds(20000));
  ASSERT_TRUE(line.ok()) << line.status();
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(' ') + 1)));
  {
    RawClient warm(port);  // the loop's first client: its buffers exist from now on
    warm.validate();
    ASSERT_TRUE(warm.send_bytes(ping_frame()));
    ASSERT_EQ(warm.read_exactly(4, milliseconds(10000)), ping_echo());
  }
  const uint64_t base = status_bytes(server->pid(), "VmRSS");
  ASSERT_GT(base, 0u);

  RawClient waiter(port);
  waiter.validate();
  ASSERT_TRUE(waiter.send_bytes(frame()));
  ASSERT_EQ(waiter.read_exactly(4, milliseconds(120000)), ping_echo());
  // The peak holds the frame while its keys are registered.
  const uint64_t peak = status_bytes(server->pid(), "VmHWM") - base;
  const uint64_t bound = frame().size() + kKeys * (kKeyBytes + kPerKeyBound) + 16 * kMiB;
  std::printf("server RSS: %.1f MiB before, peak growth %.1f MiB for a %.1f MiB request\n",
              static_cast<double>(base) / kMiB, static_cast<double>(peak) / kMiB,
              static_cast<double>(frame().size()) / kMiB);
  EXPECT_LE(peak, bound) << "peak RSS growth " << peak / kMiB << " MiB for a "
                         << frame().size() / kMiB << " MiB request";

  waiter.close_now();
  uint64_t after = 0;
  EXPECT_TRUE(eventually([&] {
    after = status_bytes(server->pid(), "VmRSS");
    return after <= base + 16 * kMiB;
  })) << (after - base) / kMiB << " MiB of RSS still held after the waiter left";
  std::printf("server RSS after the waiter left: %.1f MiB\n", static_cast<double>(after) / kMiB);
  server->kill(SIGTERM);
  EXPECT_TRUE(server->wait(milliseconds(10000)).ok());
}

}  // namespace
}  // namespace ddpx
