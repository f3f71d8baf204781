// What the hook tests share beyond starting ranks (tests/rank_threads.h):
// one-gradient buckets, bounded waits, and cross-rank equality.
#ifndef DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_
#define DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/grad_bucket.h"
#include "core/future.h"
#include "core/tensor.h"

namespace ddpx {
namespace hook_test {

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

}  // namespace hook_test
}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_HOOK_TEST_UTIL_H_
