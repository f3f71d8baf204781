// Runs hooks on real Gloo ranks: each rank a thread of this test, with its
// own ProcessGroup over a GlooBackend, all meeting through one HashStore and
// talking TCP on 127.0.0.1.
#ifndef DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_
#define DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/grad_bucket.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/process_group.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace testing {

inline constexpr std::chrono::milliseconds kHookTestTimeout{20000};

// Calls body(rank's group) on `size` threads and joins them.
inline void run_group_ranks(
    int size, const std::function<void(std::shared_ptr<ProcessGroup>)>& body) {
  auto store = std::make_shared<HashStore>(kHookTestTimeout);
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      // Each rank its own client of the shared map, as separate processes
      // would have (a Store object's timeout is per client, not shared).
      auto client = store->clone();
      ASSERT_TRUE(client.ok()) << client.status();
      auto group_store = std::make_shared<PrefixStore>(
          "world", std::shared_ptr<Store>(std::move(*client)));
      auto backend = create_gloo_backend(group_store, r, size, kHookTestTimeout);
      ASSERT_TRUE(backend.ok()) << backend.status();
      body(std::make_shared<ProcessGroup>(*backend, group_store, kHookTestTimeout));
    });
  }
  for (auto& t : threads) t.join();
}

// A one-gradient bucket over a copy of `values`.
inline GradBucket bucket_of(const std::vector<float>& values, size_t index = 0) {
  Tensor buffer = Tensor::from_vector(values);
  return GradBucket(index, /*is_last=*/true, buffer, {0},
                    {{static_cast<int64_t>(values.size())}}, {buffer});
}

// Waits (bounded, so a bug fails rather than hangs) and returns the values.
inline std::vector<float> values_of(const std::shared_ptr<Future<Tensor>>& f) {
  absl::Status s = f->wait(std::chrono::seconds(30));
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return {};
  return f->value().to_float_vector();
}

// Every rank's result must be the same, bit for bit.
inline void expect_identical_across_ranks(const std::vector<std::vector<float>>& results) {
  for (size_t r = 1; r < results.size(); ++r) {
    ASSERT_EQ(results[r].size(), results[0].size());
    EXPECT_EQ(0, memcmp(results[r].data(), results[0].data(),
                        results[0].size() * sizeof(float)))
        << "rank " << r << " differs from rank 0";
  }
}

}  // namespace testing
}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_
