// Runs a GlooBackend per rank, each rank a thread of this process, all
// meeting through one HashStore over real TCP on 127.0.0.1.
#ifndef DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_
#define DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
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

namespace ddpx {
namespace testing {

// TCP only: these tests pin the Gloo paths; tests/process_group/shm/ pins
// the shared-memory one (which a backend would take here, every rank being
// on this host).
inline GlooOptions local_options(int num_workers = 2) {
  GlooOptions o;
  o.hostname = "127.0.0.1";
  o.num_workers = num_workers;
  o.shared_memory = false;
  return o;
}

// Calls body(backend) on `size` threads, one GlooBackend each. Failures
// inside body are recorded by gtest as usual (ASSERTs end that rank only).
inline void run_ranks(
    int size, const std::function<void(GlooBackend&)>& body,
    GlooOptions options = local_options(),
    std::chrono::milliseconds timeout = std::chrono::seconds(20),
    std::shared_ptr<Store> store = nullptr) {
  if (store == nullptr) store = std::make_shared<HashStore>(timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = GlooBackend::create(store, r, size, timeout, options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      body(**backend);
    });
  }
  for (auto& t : threads) t.join();
}

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
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto context = connect_raw_context(r, size, store);
      read_pairs_on_calling_thread(*context);
      body(context, r);
    });
  }
  for (auto& t : threads) t.join();
}

// Waits for a work and returns its status (with a generous cap, so a bug
// shows up as a failure rather than a hung test).
inline absl::Status wait_ok(const std::shared_ptr<Work>& work) {
  return work->wait(std::chrono::seconds(30));
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
  run_ranks(size, [&](GlooBackend& b) {
    if (b.rank() < size - 1) {
      const auto start = std::chrono::steady_clock::now();
      outcomes[b.rank()].status = wait_ok(op(b));
      outcomes[b.rank()].elapsed = std::chrono::steady_clock::now() - start;
      ended.fetch_add(1);
    }
    while (ended.load() < size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }, options, timeout);
  return outcomes;
}

}  // namespace testing
}  // namespace ddpx

// Asserts a Work (or Status) succeeded, printing its error otherwise.
#define ASSERT_WORK_OK(work_expr)                                    \
  do {                                                               \
    absl::Status ddpx_status_ = ::ddpx::testing::wait_ok(work_expr); \
    ASSERT_TRUE(ddpx_status_.ok()) << ddpx_status_;                  \
  } while (0)

#endif  // DDPX_TESTS_PROCESS_GROUP_GLOO_GLOO_TEST_UTIL_H_
