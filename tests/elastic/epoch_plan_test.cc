// The data plan across world sizes: every sample of an epoch once, however
// often the number of ranks changes.
#include "elastic/epoch_plan.h"

#include <set>

#include "gtest/gtest.h"

namespace ddpx::elastic {
namespace {

TEST(EpochPlanTest, PermutationIsOneOfEverySampleAndDependsOnTheEpoch) {
  const std::vector<int64_t> a = epoch_permutation(1000, 7, 0);
  const std::vector<int64_t> b = epoch_permutation(1000, 7, 1);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, epoch_permutation(1000, 7, 0));
}

TEST(EpochPlanTest, EverySampleOnceWhileTheWorldChanges) {
  const int64_t n = 1003, batch = 8;
  const int worlds[] = {4, 4, 3, 3, 3, 1, 2, 4, 4};
  std::vector<int> seen(n, 0);
  int64_t consumed = 0;
  for (size_t step = 0;; ++step) {
    const int world = worlds[std::min(step, std::size(worlds) - 1)];
    StepSlice first = step_slice(n, consumed, world, 0, batch);
    if (first.epoch_done) break;
    for (int r = 0; r < world; ++r) {
      StepSlice s = step_slice(n, consumed, world, r, batch);
      ASSERT_FALSE(s.epoch_done);
      ASSERT_EQ(s.consumed_after, first.consumed_after);
      for (int64_t i = s.begin; i < s.end; ++i) ++seen[i];
    }
    consumed = first.consumed_after;
  }
  // Only a tail smaller than the last world (4) may be left out.
  EXPECT_GT(consumed, n - 4);
  for (int64_t i = 0; i < consumed; ++i) EXPECT_EQ(seen[i], 1) << i;
  for (int64_t i = consumed; i < n; ++i) EXPECT_EQ(seen[i], 0) << i;
}

}  // namespace
}  // namespace ddpx::elastic
