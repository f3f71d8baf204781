// allreduce, fp16, bf16, the wrappers and noop on real Gloo ranks (threads),
// world sizes 1..4.
#include "hooks/default_hooks.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "core/half.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using hook_test::bucket_of;
using hook_test::expect_identical_across_ranks;
using rank_threads::run_groups;
using hook_test::values_of;

constexpr int64_t kNumel = 4099;  // not a multiple of any vector width

// Rank r's gradient: normal values over many magnitudes, some exact zeros.
std::vector<float> gradient_of(int rank, int64_t n = kNumel) {
  std::mt19937 rng(1000 + rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) {
    float magnitude = std::pow(10.0f, static_cast<float>(i % 9) - 5.0f);  // 1e-5 .. 1e3
    g[i] = (i % 31 == 0) ? 0.0f : normal(rng) * magnitude;
  }
  return g;
}

std::vector<double> exact_average(int world, int64_t n = kNumel) {
  std::vector<double> avg(n, 0.0);
  for (int r = 0; r < world; ++r) {
    std::vector<float> g = gradient_of(r, n);
    for (int64_t i = 0; i < n; ++i) avg[i] += g[i];
  }
  for (double& v : avg) v /= world;
  return avg;
}

class DefaultHooks : public ::testing::TestWithParam<int> {};

TEST_P(DefaultHooks, AllreduceHookEqualsDivideThenAllreduceSum) {
  const int world = GetParam();
  std::vector<std::vector<float>> results(world);
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_allreduce_hook(pg);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    results[pg->rank()] = values_of(hook->run(bucket));
    // The same through the collective directly: what DDP does with no hook.
    std::vector<float> divided = gradient_of(pg->rank());
    for (float& v : divided) v = v / static_cast<float>(world);
    Tensor plain = Tensor::from_vector(divided);
    absl::Status plain_status = pg->allreduce({plain})->wait(std::chrono::seconds(30));
    ASSERT_TRUE(plain_status.ok()) << plain_status;
    std::vector<float> expected = plain.to_float_vector();
    ASSERT_EQ(results[pg->rank()].size(), expected.size());
    EXPECT_EQ(0, memcmp(results[pg->rank()].data(), expected.data(),
                        expected.size() * sizeof(float)));
    // And the future's tensor is the bucket's own buffer, averaged in place.
    EXPECT_EQ(bucket.buffer().to_float_vector(), results[pg->rank()]);
  });
  expect_identical_across_ranks(results);
  // Float32 rounding of p - 1 additions, relative to the sum of magnitudes.
  std::vector<double> avg = exact_average(world), magnitude(kNumel, 0.0);
  for (int r = 0; r < world; ++r) {
    std::vector<float> g = gradient_of(r);
    for (int64_t i = 0; i < kNumel; ++i) magnitude[i] += std::fabs(g[i]) / world;
  }
  for (int64_t i = 0; i < kNumel; ++i) {
    ASSERT_NEAR(results[0][i], avg[i], world * 1.2e-7 * magnitude[i]) << i;
  }
}

// |result - exact| for a 16-bit format with unit roundoff u: each rank's
// cast errs by u |x_r| / p, and each of the p - 1 additions by u |partial
// sum|; subnormal results add an absolute half-ulp per operation.
void expect_within_rounding_bound(const std::vector<float>& result, int world,
                                  double u, double subnormal_ulp) {
  std::vector<double> abs_sum(kNumel, 0.0);
  for (int r = 0; r < world; ++r) {
    std::vector<float> g = gradient_of(r);
    for (int64_t i = 0; i < kNumel; ++i) abs_sum[i] += std::fabs(g[i]) / world;
  }
  std::vector<double> avg = exact_average(world);
  for (int64_t i = 0; i < kNumel; ++i) {
    double bound = u * abs_sum[i] * world * 1.01 + world * subnormal_ulp;
    ASSERT_LE(std::fabs(result[i] - avg[i]), bound)
        << "element " << i << " exact " << avg[i] << " got " << result[i];
  }
}

TEST_P(DefaultHooks, Fp16HookIsWithinHalfPrecisionRounding) {
  const int world = GetParam();
  std::vector<std::vector<float>> results(world);
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_fp16_compress_hook(pg);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    results[pg->rank()] = values_of(hook->run(bucket));
    EXPECT_EQ(bucket.buffer().to_float_vector(), results[pg->rank()]);
  });
  expect_identical_across_ranks(results);
  expect_within_rounding_bound(results[0], world, std::ldexp(1.0, -11), std::ldexp(1.0, -25));
}

TEST_P(DefaultHooks, Bf16HookIsWithinBFloat16Rounding) {
  const int world = GetParam();
  std::vector<std::vector<float>> results(world);
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_bf16_compress_hook(pg);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    results[pg->rank()] = values_of(hook->run(bucket));
  });
  expect_identical_across_ranks(results);
  expect_within_rounding_bound(results[0], world, std::ldexp(1.0, -8), 1e-38);
}

TEST_P(DefaultHooks, Fp16HookDoesNotOverflowOnLargeGradients) {
  // 4e4 fits float16 (max 65504) but 4e4 * world does not; 1e5 does not fit
  // at all, but 1e5 / world does. Dividing before the cast keeps both finite.
  const int world = GetParam();
  std::vector<std::vector<float>> results(world);
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> g(64, 4e4f);
    g[7] = pg->rank() == 0 ? 1e5f : 0.0f;
    auto hook = make_fp16_compress_hook(pg);
    GradBucket bucket = bucket_of(g);
    results[pg->rank()] = values_of(hook->run(bucket));
  });
  for (int64_t i = 0; i < 64; ++i) {
    double expected = i == 7 ? 1e5 / world : 4e4;
    if (expected > 65504) continue;  // world 1: the average itself is too big
    ASSERT_TRUE(std::isfinite(results[0][i])) << i;
    ASSERT_NEAR(results[0][i], expected, expected * std::ldexp(1.0, -10)) << i;
  }
}

TEST_P(DefaultHooks, NoopReturnsTheBufferUntouchedWithoutCommunicating) {
  const int world = GetParam();
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_noop_hook();
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    uint64_t ops_before = pg->counters().ops.load();
    auto result = hook->run(bucket);
    ASSERT_TRUE(result->is_completed());
    EXPECT_TRUE(result->value().shares_storage_with(bucket.buffer()));
    EXPECT_EQ(result->value().to_float_vector(), gradient_of(pg->rank()));
    EXPECT_EQ(pg->counters().ops.load(), ops_before);
    HookStats s = hook->stats();
    EXPECT_EQ(s.calls, 1u);
    EXPECT_EQ(s.wire_bytes, 0u);
  });
}

// noop:sync=1 sends no data but each bucket's future waits for every rank:
// the last rank reaches the hook 300 ms after the others, and no other
// rank's future completes before that arrival.
TEST_P(DefaultHooks, SynchronizingNoopWaitsForTheLastRankAndLeavesTheBuffer) {
  const int world = GetParam();
  std::atomic<int64_t> last_arrival_ns{0};
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_synchronizing_noop_hook(pg);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    const bool last = pg->rank() == world - 1;
    if (last) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      last_arrival_ns = now_ns();
    }
    auto result = hook->run(bucket);
    ASSERT_TRUE(result->wait().ok());
    const int64_t done_ns = now_ns();
    if (!last) {
      EXPECT_NE(last_arrival_ns.load(), 0) << "rank " << pg->rank() << " did not wait";
      EXPECT_GE(done_ns, last_arrival_ns.load());
    }
    EXPECT_TRUE(result->value().shares_storage_with(bucket.buffer()));
    EXPECT_EQ(result->value().to_float_vector(), gradient_of(pg->rank()));
    HookStats s = hook->stats();
    EXPECT_EQ(s.calls, 1u);
    EXPECT_EQ(s.wire_bytes, 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DefaultHooks, ::testing::Values(1, 2, 3, 4));

// With two ranks, a sum of two float16 values is one rounding whatever the
// algorithm, so exact results can be written down.
TEST(DefaultHooksTwoRanks, Fp16HookIsRoundedOnceBeforeAndOnceInTheSum) {
  std::vector<std::vector<float>> results(2);
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_fp16_compress_hook(pg);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    results[pg->rank()] = values_of(hook->run(bucket));
  });
  std::vector<float> a = gradient_of(0), b = gradient_of(1);
  for (int64_t i = 0; i < kNumel; ++i) {
    float ha = half_bits_to_float(float_to_half_bits(a[i] / 2.0f));
    float hb = half_bits_to_float(float_to_half_bits(b[i] / 2.0f));
    float expected = half_bits_to_float(float_to_half_bits(ha + hb));
    ASSERT_EQ(results[0][i], expected) << "element " << i;
  }
}

TEST(DefaultHooksTwoRanks, Fp16WrapperOfAllreduceCastsFirstLikeTorch) {
  // torch's fp16_compress_hook == fp16_compress_wrapper(allreduce_hook):
  // cast, then divide in float16. Large values overflow there (the reason
  // our fp16 hook divides first).
  std::vector<float> a = gradient_of(0), b = gradient_of(1);
  a[5] = 1e5f;
  b[5] = 1.0f;
  std::vector<std::vector<float>> results(2);
  std::vector<HookStats> stats(2);
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = fp16_compress_wrapper(make_allreduce_hook(pg));
    EXPECT_EQ(hook->name(), "fp16+allreduce");
    GradBucket bucket = bucket_of(pg->rank() == 0 ? a : b);
    results[pg->rank()] = values_of(hook->run(bucket));
    stats[pg->rank()] = hook->stats();
  });
  for (int64_t i = 0; i < kNumel; ++i) {
    auto torch_order = [](float x) {
      float h = half_bits_to_float(float_to_half_bits(x));
      return half_bits_to_float(float_to_half_bits(h / 2.0f));
    };
    float expected = half_bits_to_float(float_to_half_bits(torch_order(a[i]) + torch_order(b[i])));
    ASSERT_EQ(results[0][i], expected) << "element " << i;
    ASSERT_EQ(results[1][i], expected) << "element " << i;
  }
  EXPECT_TRUE(std::isinf(results[0][5]));
  EXPECT_DOUBLE_EQ(stats[0].compression_ratio(), 2.0);
  EXPECT_EQ(stats[0].input_bytes, kNumel * 4u);
  EXPECT_EQ(stats[0].payload_bytes, kNumel * 2u);
}

TEST(DefaultHooksTwoRanks, Bf16WrapperMatchesCastThenDivide) {
  std::vector<std::vector<float>> results(2);
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = bf16_compress_wrapper(make_allreduce_hook(pg));
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    results[pg->rank()] = values_of(hook->run(bucket));
  });
  std::vector<float> a = gradient_of(0), b = gradient_of(1);
  auto bf = [](float x) { return bfloat16_bits_to_float(float_to_bfloat16_bits(x)); };
  for (int64_t i = 0; i < kNumel; ++i) {
    ASSERT_EQ(results[0][i], bf(bf(bf(a[i]) / 2.0f) + bf(bf(b[i]) / 2.0f))) << i;
  }
}

TEST(DefaultHooksTwoRanks, StatsMatchTheProcessGroupCounters) {
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto fp16 = make_fp16_compress_hook(pg);
    auto plain = make_allreduce_hook(pg);
    uint64_t before = pg->counters().payload_bytes.load();
    for (int step = 0; step < 3; ++step) {
      GradBucket bucket = bucket_of(gradient_of(pg->rank()));
      values_of(fp16->run(bucket));
    }
    EXPECT_EQ(pg->counters().payload_bytes.load() - before, fp16->stats().payload_bytes);
    HookStats s = fp16->stats();
    EXPECT_EQ(s.calls, 3u);
    EXPECT_EQ(s.input_bytes, 3u * kNumel * 4);
    EXPECT_EQ(s.payload_bytes, 3u * kNumel * 2);
    EXPECT_EQ(s.wire_bytes, 3u * kNumel * 2);  // ring: 2 (p-1)/p of the buffer
    EXPECT_DOUBLE_EQ(s.compression_ratio(), 2.0);
    GradBucket bucket = bucket_of(gradient_of(pg->rank()));
    values_of(plain->run(bucket));
    EXPECT_DOUBLE_EQ(plain->stats().compression_ratio(), 1.0);
    EXPECT_EQ(comm_hook_stats(*plain).wire_bytes, kNumel * 4u);
  });
}

TEST(DefaultHooksErrors, NonFloatBucketIsRejectedWithItsDtype) {
  run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
    GradBucket bucket(0, true, ints, {0}, {{3}}, {ints});
    for (auto& hook : {make_fp16_compress_hook(pg), make_allreduce_hook(pg),
                       make_bf16_compress_hook(pg)}) {
      absl::Status s = hook->run(bucket)->wait(std::chrono::seconds(5));
      EXPECT_FALSE(s.ok()) << hook->name();
      EXPECT_NE(std::string(s.message()).find("int32"), std::string::npos) << s;
    }
  });
}

}  // namespace
}  // namespace ddpx
