// process_group/gloo/tcp_pair_access reads protected fields of libgloo 0.5's
// tcp::Pair. Each test checks one of them against what Gloo itself or the
// kernel reports on live pairs, so that a Gloo with another layout fails
// here (with the field named) instead of misbehaving in the backend. On a
// failure: read the new gloo/transport/tcp/pair.h and update
// process_group/gloo/tcp_pair_access.cc.
#include "process_group/gloo/tcp_pair_access.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gloo/allreduce_ring.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;
using gloo_test::connect_raw_context;
using Context = gloo::rendezvous::Context;

constexpr int kSize = 2;
constexpr const char* kCheck =
    " (Gloo's tcp::Pair is not what process_group/gloo/tcp_pair_access.cc assumes)";

// Calls body(context, rank) on kSize threads, each with a fresh raw Gloo
// context (event-loop pairs on 127.0.0.1); no rank closes its pairs before
// every rank's body has returned.
void run_raw_ranks(const std::function<void(Context&, int)>& body) {
  gloo::rendezvous::HashStore store;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<Context> context = connect_raw_context(r, kSize, store);
      body(*context, r);
      done.fetch_add(1);
      while (done.load() < kSize) std::this_thread::sleep_for(milliseconds(1));
    });
  }
  for (auto& t : threads) t.join();
}

// Both ranks run the same classic ring allreduce of `count` floats, whose
// bound-buffer sends go through Gloo's tcp::Pair::send (the path that sizes
// SO_SNDBUF and records it in sendBufferSize_).
void classic_allreduce(Context& context, size_t count) {
  std::vector<float> data(count, 1.0f);
  std::vector<float*> ptrs = {data.data()};
  auto shared = std::shared_ptr<Context>(&context, [](Context*) {});
  gloo::AllreduceRing<float>(shared, ptrs, static_cast<int>(count)).run();
  ASSERT_EQ(data[0], static_cast<float>(kSize));
}

int reported_send_buffer(int fd) {
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len), 0) << strerror(errno);
  return bytes;
}

uint16_t port_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port)
                                : ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
}

TEST(TcpPairAccess, NoPairForThisRankOrOutOfRange) {
  run_raw_ranks([](Context& context, int rank) {
    for (int peer : {rank, -1, kSize}) {
      EXPECT_FALSE(is_tcp_pair(context, peer));
      EXPECT_FALSE(tcp_pair_record_send_buffer(context, peer, 1));
      EXPECT_EQ(tcp_pair_recorded_send_buffer(context, peer), 0u);
      EXPECT_FALSE(tcp_pair_set_sync(context, peer));
      EXPECT_FALSE(tcp_pair_is_sync(context, peer));
      EXPECT_EQ(tcp_pair_socket(context, peer), -1);
      EXPECT_EQ(tcp_pair_mutex(context, peer), nullptr);
    }
    EXPECT_TRUE(is_tcp_pair(context, 1 - rank));
  });
}

// fd_: the socket read is one end of the connection between the two ranks:
// this rank's local port is the peer's remote port and the other way round.
TEST(TcpPairAccess, SocketIsTheConnectionToThePeer) {
  std::vector<sockaddr_storage> local(kSize), remote(kSize);
  std::atomic<int> read{0};
  run_raw_ranks([&](Context& context, int rank) {
    const int fd = tcp_pair_socket(context, 1 - rank);
    ASSERT_GE(fd, 0) << "fd_" << kCheck;
    int type = 0;
    socklen_t len = sizeof(type);
    ASSERT_EQ(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len), 0) << "fd_" << kCheck;
    EXPECT_EQ(type, SOCK_STREAM) << "fd_" << kCheck;
    len = sizeof(sockaddr_storage);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&local[rank]), &len), 0);
    len = sizeof(sockaddr_storage);
    ASSERT_EQ(getpeername(fd, reinterpret_cast<sockaddr*>(&remote[rank]), &len), 0)
        << "fd_ is not a connected socket" << kCheck;
    read.fetch_add(1);
  });
  ASSERT_EQ(read.load(), kSize);
  EXPECT_EQ(port_of(local[0]), port_of(remote[1])) << "fd_" << kCheck;
  EXPECT_EQ(port_of(local[1]), port_of(remote[0])) << "fd_" << kCheck;
}

// sync_: false on a fresh pair, true once Gloo's own setSync has run.
TEST(TcpPairAccess, SyncFlagIsTheOneSetSyncSets) {
  run_raw_ranks([](Context& context, int rank) {
    const int peer = 1 - rank;
    EXPECT_FALSE(tcp_pair_is_sync(context, peer)) << "sync_" << kCheck;
    ASSERT_TRUE(tcp_pair_set_sync(context, peer));
    EXPECT_TRUE(tcp_pair_is_sync(context, peer)) << "sync_" << kCheck;
  });
}

// m_: Gloo's setSync takes the pair's lock, so it waits while we hold the
// mutex we read, and goes on once we let it go.
TEST(TcpPairAccess, MutexIsTheLockGlooTakes) {
  run_raw_ranks([](Context& context, int rank) {
    const int peer = 1 - rank;
    std::mutex* m = tcp_pair_mutex(context, peer);
    ASSERT_NE(m, nullptr);
    std::atomic<bool> switched{false};
    std::unique_lock<std::mutex> held(*m);
    std::thread gloo_call([&] {
      tcp_pair_set_sync(context, peer);
      switched.store(true);
    });
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_FALSE(switched.load()) << "Gloo's setSync ran while m_ was held" << kCheck;
    held.unlock();
    gloo_call.join();
    EXPECT_TRUE(switched.load());
  });
}

// sendBufferSize_: 0 on a fresh pair; after a classic op Gloo has set
// SO_SNDBUF and recorded what getsockopt reported, which is what we read.
TEST(TcpPairAccess, RecordedSendBufferIsWhatGlooSets) {
  run_raw_ranks([](Context& context, int rank) {
    const int peer = 1 - rank;
    EXPECT_EQ(tcp_pair_recorded_send_buffer(context, peer), 0u) << "sendBufferSize_" << kCheck;
    classic_allreduce(context, 16 << 10);
    const size_t recorded = tcp_pair_recorded_send_buffer(context, peer);
    EXPECT_GT(recorded, 0u) << "sendBufferSize_" << kCheck;
    EXPECT_EQ(recorded, static_cast<size_t>(reported_send_buffer(tcp_pair_socket(context, peer))))
        << "sendBufferSize_" << kCheck;
  });
}

// Writing sendBufferSize_ reaches Gloo: with a large size recorded, a
// classic op leaves the socket's buffer alone (what keep_send_buffer_autotuning
// relies on).
TEST(TcpPairAccess, ARecordedSizeKeepsGlooFromSettingOne) {
  run_raw_ranks([](Context& context, int rank) {
    const int peer = 1 - rank;
    const int fd = tcp_pair_socket(context, peer);
    const int before = reported_send_buffer(fd);
    ASSERT_TRUE(tcp_pair_record_send_buffer(context, peer, size_t{32} << 20));
    classic_allreduce(context, 16 << 10);
    EXPECT_EQ(reported_send_buffer(fd), before) << "sendBufferSize_ (written)" << kCheck;
    EXPECT_EQ(tcp_pair_recorded_send_buffer(context, peer), size_t{32} << 20);
  });
}

// tcp_pair_size_send_buffer asks the kernel on the pair's socket and records
// the request.
TEST(TcpPairAccess, SizingSetsTheSocketAndTheRecord) {
  run_raw_ranks([](Context& context, int rank) {
    const int peer = 1 - rank;
    ASSERT_TRUE(tcp_pair_size_send_buffer(context, peer, 64 << 10).ok());
    EXPECT_EQ(tcp_pair_recorded_send_buffer(context, peer), size_t{64} << 10);
    // Linux reports twice what it granted.
    EXPECT_EQ(tcp_pair_socket_send_buffer(context, peer), size_t{128} << 10);
    EXPECT_EQ(reported_send_buffer(tcp_pair_socket(context, peer)), 128 << 10);
  });
}

// Closing and settling fails the receives still posted with the reason
// given, closes the sockets (a peer waiting for data hears of it at once,
// not at its timeout), and leaves the buffer free to be released.
TEST(TcpPairAccess, CloseAndSettleFailsPostedOpsAndClosesThePairs) {
  std::atomic<int> posted{0};
  run_raw_ranks([&posted](Context& context, int rank) {
    const int peer = 1 - rank;
    uint8_t byte = 0;
    auto buffer = context.createUnboundBuffer(&byte, 1);
    buffer->recv(peer, /*slot=*/7);  // never sent by the peer
    posted.fetch_add(1);
    if (rank == 0) {
      // Posting on a pair the peer already closed throws at once.
      while (posted.load() < kSize) std::this_thread::sleep_for(milliseconds(1));
      tcp_pairs_close_and_settle(context, "test: leaving the group");
      EXPECT_EQ(tcp_pair_socket(context, peer), -1);
      try {
        buffer->waitRecv(milliseconds(5000));
        ADD_FAILURE() << "a receive posted on a closed pair completed";
      } catch (const gloo::IoException& e) {
        EXPECT_NE(std::string(e.what()).find("test: leaving the group"), std::string::npos)
            << e.what();
      }
    } else {
      const auto start = std::chrono::steady_clock::now();
      EXPECT_THROW(buffer->waitRecv(milliseconds(20000)), gloo::IoException);
      EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(10000))
          << "the peer learnt of the closed pair only at its timeout";
    }
    buffer.reset();  // no device-thread handler may touch it any more
  });
}

}  // namespace
}  // namespace ddpx
