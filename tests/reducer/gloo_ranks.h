// Runs N ranks as threads of this process, each with a real ProcessGroup on
// the Gloo backend (TCP over 127.0.0.1), meeting through one HashStore.
#ifndef DDPX_TESTS_REDUCER_GLOO_RANKS_H_
#define DDPX_TESTS_REDUCER_GLOO_RANKS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/process_group.h"
#include "store/hash_store.h"

namespace ddpx {
namespace testing {

// body(rank, pg) runs on each rank's thread; gtest failures inside it are
// recorded as usual (an ASSERT ends that rank only).
inline void run_gloo_ranks(int size,
                           const std::function<void(int, std::shared_ptr<ProcessGroup>)>& body,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto store = std::make_shared<HashStore>(timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options;
      options.hostname = "127.0.0.1";
      options.num_workers = 2;
      auto backend = GlooBackend::create(store, r, size, timeout, options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      auto pg = std::make_shared<ProcessGroup>(*backend, store, timeout);
      body(r, pg);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace testing
}  // namespace ddpx

#endif  // DDPX_TESTS_REDUCER_GLOO_RANKS_H_
