// What the Gloo backend's tests share beyond starting ranks (which is
// tests/rank_threads.h): raw Gloo contexts for the pieces below GlooBackend,
// and a rank that stays silent.
#ifndef DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_
#define DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/sync_pairs.h"
#include "store/hash_store.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace gloo_test {

// A raw Gloo context (its own TCP device on 127.0.0.1, 20 s timeout)
// connected through `store`, for tests of the pieces below GlooBackend.
inline std::shared_ptr<gloo::rendezvous::Context> connect_raw_context(
    int rank, int size, gloo::rendezvous::Store& store) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(20));
  auto device = gloo::transport::tcp::CreateDevice(attr);
  context->connectFullMesh(store, device);
  return context;
}

// Calls body(context, rank) on `size` threads, each with its own raw
// context (above) whose pairs are switched to sync mode (sync_pairs.h).
inline void run_raw_sync_ranks(
    int size,
    const std::function<void(const std::shared_ptr<gloo::rendezvous::Context>&, int)>& body) {
  gloo::rendezvous::HashStore store;
  rank_threads::on_every_rank(size, [&](int r) {
    auto context = connect_raw_context(r, size, store);
    read_pairs_on_calling_thread(*context);
    body(context, r);
  });
}

// What one rank's op gave, and how long it took.
struct OpOutcome {
  absl::Status status;
  std::chrono::steady_clock::duration elapsed{};
};

// Runs `op` on every rank but the last, which stays connected and never
// joins; returns the joining ranks' outcomes, indexed by rank. Every rank
// keeps its backend until all ops have ended: one that left early would
// close its connections and fail the others with "Connection closed"
// instead of their own timeout.
inline std::vector<OpOutcome> run_with_a_silent_rank(
    int size, const std::function<std::shared_ptr<Work>(GlooBackend&)>& op,
    GlooOptions options, std::chrono::milliseconds timeout) {
  std::vector<OpOutcome> outcomes(size - 1);
  std::atomic<int> ended{0};
  rank_threads::run_gloo_backends(size, [&](GlooBackend& b) {
    if (b.rank() < size - 1) {
      const auto start = std::chrono::steady_clock::now();
      outcomes[b.rank()].status = rank_threads::wait_ok(op(b));
      outcomes[b.rank()].elapsed = std::chrono::steady_clock::now() - start;
      ended.fetch_add(1);
    }
    while (ended.load() < size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }, options, timeout);
  return outcomes;
}

}  // namespace gloo_test
}  // namespace ddpx

#endif  // DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_
