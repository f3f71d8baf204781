// The element-wise kernels' per-thread bodies (cuda/elementwise_math.h),
// replayed for every thread of the grid the launcher uses, give bit for bit
// what the CPU PowerSGD step computes with hooks/powersgd_kernels.h: the
// device step's error feedback, error update and averaging are the CPU's.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/elementwise_math.h"
#include "cuda/launch_math.h"
#include "gtest/gtest.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_random.h"

namespace ddpx {
namespace {

// Every thread of the grid elementwise.cu launches for n elements.
template <typename Body>
void replay_grid(int64_t n, Body body) {
  const int64_t threads =
      static_cast<int64_t>(cuda_math::grid_blocks(n, cuda_math::kThreadsPerBlock)) *
      cuda_math::kThreadsPerBlock;
  for (int64_t t = 0; t < threads; ++t) body(t, threads);
}

std::vector<float> awkward_values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_standard_normal(v.data(), n, seed);
  // Magnitudes far apart (cancellation, rounding), signed zeros, a
  // subnormal and infinities.
  for (int64_t i = 0; i < n; i += 7) v[i] *= 1e7f;
  if (n > 3) {
    v[1] = -0.0f;
    v[2] = std::numeric_limits<float>::denorm_min();
    v[3] = std::numeric_limits<float>::infinity();
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

TEST(ElementwiseMath, AddAndSubtractAreTheCpuStepsBitForBit) {
  // More elements than one grid of kMaxBlocks blocks covers, so threads
  // loop (grid stride); and sizes that leave threads idle.
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{4096} * 256 + 37}) {
    const std::vector<float> a = awkward_values(n, 1), b = awkward_values(n, 2);
    std::vector<float> want_add = a, want_sub = a;
    add_inplace(want_add.data(), b.data(), n);
    subtract_inplace(want_sub.data(), b.data(), n);
    std::vector<float> got_add = a, got_sub = a;
    replay_grid(n, [&](int64_t t, int64_t stride) {
      cuda_math::add_scaled_thread(got_add.data(), 1.0f, b.data(), got_add.data(), n, t, stride);
      cuda_math::add_scaled_thread(got_sub.data(), -1.0f, b.data(), got_sub.data(), n, t,
                                   stride);
    });
    EXPECT_TRUE(same_bits(got_add, want_add)) << n;
    EXPECT_TRUE(same_bits(got_sub, want_sub)) << n;
  }
}

TEST(ElementwiseMath, AddScaledRoundsTheProductThenTheSum) {
  // 1 + 3 * (1/3 rounded): no fused multiply-add, two roundings.
  const float third = 1.0f / 3.0f;
  const float product = 3.0f * third;
  EXPECT_EQ(cuda_math::add_scaled(1.0f, 3.0f, third), 1.0f + product);
  EXPECT_EQ(cuda_math::add_scaled(2.0f, 0.5f, 4.0f), 4.0f);
}

TEST(ElementwiseMath, DivideIsTheCpuAveragingBitForBit) {
  const int64_t n = 100003;
  for (float divisor : {1.0f, 2.0f, 3.0f, 7.0f}) {
    std::vector<float> want = awkward_values(n, 3), got = want;
    divide_inplace(want.data(), divisor, n);
    replay_grid(n, [&](int64_t t, int64_t stride) {
      cuda_math::divide_thread(got.data(), divisor, n, t, stride);
    });
    EXPECT_TRUE(same_bits(got, want)) << divisor;
  }
}

TEST(ElementwiseMath, FillCoversEveryElementOnce) {
  const int64_t n = 4096 * 256 * 2 + 5;
  std::vector<float> x(static_cast<size_t>(n), -1.0f);
  std::vector<int> writes(static_cast<size_t>(n), 0);
  replay_grid(n, [&](int64_t t, int64_t stride) {
    cuda_math::fill_thread(x.data(), 0.25f, n, t, stride);
    for (int64_t i = t; i < n; i += stride) ++writes[i];
  });
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(x[i], 0.25f) << i;
    ASSERT_EQ(writes[i], 1) << i;
  }
}

}  // namespace
}  // namespace ddpx
