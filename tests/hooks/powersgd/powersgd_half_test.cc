// PowerSGD on float16/bfloat16 buckets: "fp16+powersgd" and "bf16+powersgd"
// (and the batched hook) built by make_comm_hook on real Gloo ranks (threads
// of this process over loopback TCP), against float32 PowerSGD on the same
// values. The math is float32 in both; only P, Q, the uncompressed batch and
// the result are rounded to the 16-bit format, so the results agree to within
// a few of that format's roundings, while the bytes on the wire halve.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_hook.h"
#include "hooks/registry.h"
#include "core/half.h"
#include "tests/hooks/powersgd/powersgd_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using powersgd_test::make_bucket;
using rank_threads::make_groups;
using rank_threads::on_every_rank;
using powersgd_test::random_input;
using powersgd_test::total_numel;
using Values = std::vector<float>;

constexpr int kWorld = 3;
constexpr int kIterations = 5;  // 2 plain allreduces, then 3 compressed steps
// A compressed 16x12 and 8x6, an uncompressed vector and a 2x3 matrix too
// small to be worth compressing at rank 2 (it joins the uncompressed batch).
const std::vector<Shape> kShapes = {{16, 12}, {12}, {8, 6}, {2, 3}};

struct Format {
  const char* wrapper;  // "fp16" / "bf16"
  // Unit roundoff: half the distance from 1 to the next value.
  double unit_roundoff;
  float (*round)(float);
};

float round_half(float x) { return half_bits_to_float(float_to_half_bits(x)); }
float round_bf16(float x) { return bfloat16_bits_to_float(float_to_bfloat16_bits(x)); }

const Format kFp16{"fp16", std::ldexp(1.0, -11), round_half};
const Format kBf16{"bf16", std::ldexp(1.0, -8), round_bf16};

struct Run {
  std::vector<std::vector<Values>> outputs;  // [iteration][rank]
  HookStats stats;                           // rank 0's
};

// Runs `spec` on every rank for kIterations buckets of random values that
// are exact in `format` (so float32 and 16-bit runs see the same inputs).
Run run_spec(const std::string& spec, const Format& format,
             const std::vector<std::shared_ptr<ProcessGroup>>& pgs) {
  std::vector<std::unique_ptr<CommHook>> hooks;
  for (const auto& pg : pgs) {
    auto hook = make_comm_hook(spec, pg);
    EXPECT_TRUE(hook.ok()) << spec << ": " << hook.status();
    if (!hook.ok()) return {};
    hooks.push_back(*std::move(hook));
  }
  const int64_t n = total_numel(kShapes);
  Run run;
  for (int it = 0; it < kIterations; ++it) {
    std::vector<Values> outputs(kWorld);
    on_every_rank(kWorld, [&](int r) {
      Values in = random_input(n, 7, r, it);
      for (float& x : in) x = format.round(x);
      GradBucket bucket = make_bucket(0, /*is_last=*/true, kShapes, in);
      auto result = hooks[r]->run(bucket)->result();
      ASSERT_TRUE(result.ok()) << spec << " rank " << r << ": " << result.status();
      outputs[r] = result->to_float_vector();
    });
    run.outputs.push_back(outputs);
  }
  run.stats = comm_hook_stats(*hooks[0]);
  return run;
}

void expect_matches_float32(const std::string& base_spec, const Format& format) {
  const std::string spec = std::string(format.wrapper) + "+" + base_spec;
  SCOPED_TRACE(spec);
  auto pgs = make_groups(kWorld);
  Run wide = run_spec(base_spec, format, pgs);
  Run narrow = run_spec(spec, format, pgs);
  ASSERT_EQ(narrow.outputs.size(), static_cast<size_t>(kIterations));
  ASSERT_EQ(wide.outputs.size(), static_cast<size_t>(kIterations));
  for (int it = 0; it < kIterations; ++it) {
    const std::vector<Values>& got = narrow.outputs[it];
    const Values& want = wide.outputs[it][0];
    for (int r = 1; r < kWorld; ++r) {
      EXPECT_EQ(got[r], got[0]) << "iteration " << it << " rank " << r;
    }
    double scale = 0;
    for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
    // Every rounding of the 16-bit path (inputs averaged on the wire, P and
    // Q each rounded once, the result once) moves a value by a unit roundoff
    // of the largest magnitude involved; orthogonalization can amplify P's
    // and Q's by a small factor, and error feedback carries differences
    // into later steps. The worst seen on these inputs is about 3 of them;
    // 8 is far below what a wrong factor, a missing division or a stale
    // memory would change.
    const double tolerance = 8 * format.unit_roundoff * scale;
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      // The result went through the bucket's format.
      ASSERT_EQ(got[0][i], format.round(got[0][i])) << "iteration " << it << " [" << i << "]";
      worst = std::max(worst, std::fabs(static_cast<double>(got[0][i]) - want[i]));
    }
    EXPECT_LE(worst, tolerance) << "iteration " << it << " (scale " << scale << ")";
    // The 16-bit path really rounds: a result bit-equal to float32 would mean
    // the wire stayed float32.
    if (it >= 2) {
      EXPECT_NE(got[0], want) << "iteration " << it;
    }
  }
  // Every collective (the plain allreduces before start_iter, P, Q and the
  // uncompressed batch) carries half the bytes of float32 PowerSGD's, and
  // the baseline (a float32 allreduce of the bucket) is the same.
  EXPECT_EQ(narrow.stats.calls, wide.stats.calls);
  EXPECT_EQ(narrow.stats.input_bytes, wide.stats.input_bytes);
  EXPECT_EQ(2 * narrow.stats.payload_bytes, wide.stats.payload_bytes);
  EXPECT_NEAR(2.0 * narrow.stats.wire_bytes, wide.stats.wire_bytes,
              0.01 * wide.stats.wire_bytes);
  EXPECT_NEAR(narrow.stats.baseline_wire_bytes, wide.stats.baseline_wire_bytes,
              0.01 * wide.stats.baseline_wire_bytes);
  EXPECT_NEAR(narrow.stats.compression_ratio(), 2 * wide.stats.compression_ratio(),
              0.02 * wide.stats.compression_ratio());
}

TEST(PowerSGDHalf, Fp16PowerSGDIsFloat32PowerSGDWithinFloat16Rounding) {
  expect_matches_float32("powersgd:rank=2,start_iter=2", kFp16);
}

TEST(PowerSGDHalf, Bf16PowerSGDIsFloat32PowerSGDWithinBfloat16Rounding) {
  expect_matches_float32("powersgd:rank=2,start_iter=2", kBf16);
}

TEST(PowerSGDHalf, Fp16BatchedPowerSGDIsFloat32BatchedWithinFloat16Rounding) {
  expect_matches_float32("batched_powersgd:rank=2,start_iter=2", kFp16);
}

TEST(PowerSGDHalf, Bf16BatchedPowerSGDIsFloat32BatchedWithinBfloat16Rounding) {
  expect_matches_float32("batched_powersgd:rank=2,start_iter=2", kBf16);
}

// Buckets of other dtypes are refused at the first compressed step with an
// error naming the dtype, by both hooks.
TEST(PowerSGDHalf, AFloat64BucketIsAClearError) {
  auto pgs = make_groups(1);
  for (bool batched : {false, true}) {
    auto hook = make_powersgd_hook(
        pgs[0], {{"rank", "1"}, {"start_iter", "0"}, {"use_error_feedback", "0"},
                 {"warm_start", "0"}},
        batched);
    ASSERT_TRUE(hook.ok()) << hook.status();
    Tensor buffer = Tensor::zeros({12}, DType::kFloat64);
    GradBucket bucket(0, true, buffer, {0}, {{3, 4}}, {Tensor::zeros({3, 4}, DType::kFloat64)});
    auto result = (*hook)->run(bucket)->result();
    ASSERT_FALSE(result.ok()) << (batched ? "batched" : "layer-wise");
    EXPECT_NE(std::string(result.status().message()).find("float64"), std::string::npos)
        << result.status();
  }
}

}  // namespace
}  // namespace ddpx
