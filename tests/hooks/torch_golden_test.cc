// Our default hooks against torch's (tests/reference/default_hooks_goldens.py
// ran torch's allreduce_hook, fp16_compress_hook and bf16_compress_hook on
// two gloo ranks and saved inputs and results). Same inputs, two Gloo ranks
// here, bit-for-bit comparison.
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/default_hooks.h"
#include "core/half.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using hook_test::bucket_of;
using rank_threads::run_groups;
using hook_test::values_of;

std::vector<float> read_golden(const std::string& name) {
  const std::string path = "tests/reference/golden/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.size() % 4, 0u) << path;
  std::vector<float> v(bytes.size() / 4);
  memcpy(v.data(), bytes.data(), v.size() * 4);  // little endian, as written
  return v;
}

using HookMaker = std::function<std::unique_ptr<CountingHook>(std::shared_ptr<ProcessGroup>)>;

std::vector<float> run_on_golden_inputs(const HookMaker& make) {
  std::vector<std::vector<float>> inputs = {read_golden("default_hooks_input_rank0.f32"),
                                            read_golden("default_hooks_input_rank1.f32")};
  std::vector<std::vector<float>> results(2);
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make(pg);
    GradBucket bucket = bucket_of(inputs[pg->rank()]);
    results[pg->rank()] = values_of(hook->run(bucket));
  });
  EXPECT_EQ(0, memcmp(results[0].data(), results[1].data(), results[0].size() * 4))
      << "ranks disagree";
  return results[0];
}

// Counts elements whose bits differ; NaN == NaN when the bits agree.
int64_t count_mismatches(const std::vector<float>& ours, const std::vector<float>& torch,
                         const std::function<bool(size_t)>& skip = nullptr) {
  EXPECT_EQ(ours.size(), torch.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < ours.size() && i < torch.size(); ++i) {
    if (skip && skip(i)) continue;
    if (float_bits(ours[i]) != float_bits(torch[i])) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "element " << i << ": ours " << ours[i] << " torch " << torch[i];
      }
    }
  }
  return mismatches;
}

TEST(TorchGolden, AllreduceHookMatchesExactly) {
  std::vector<float> torch = read_golden("default_hooks_allreduce.f32");
  ASSERT_EQ(torch.size(), 3000u);
  EXPECT_EQ(count_mismatches(run_on_golden_inputs(make_allreduce_hook), torch), 0);
}

TEST(TorchGolden, Bf16HookMatchesExactly) {
  std::vector<float> torch = read_golden("default_hooks_bf16.f32");
  EXPECT_EQ(count_mismatches(run_on_golden_inputs(make_bf16_compress_hook), torch), 0);
  EXPECT_EQ(count_mismatches(
                run_on_golden_inputs([](std::shared_ptr<ProcessGroup> pg) {
                  return bf16_compress_wrapper(make_allreduce_hook(pg));
                }),
                torch),
            0);
}

TEST(TorchGolden, Fp16WrapperOfAllreduceIsTorchsFp16HookExactly) {
  // torch casts to float16 and then divides; so does this composition,
  // overflow to inf included.
  std::vector<float> torch = read_golden("default_hooks_fp16.f32");
  EXPECT_EQ(count_mismatches(run_on_golden_inputs([](std::shared_ptr<ProcessGroup> pg) {
                               return fp16_compress_wrapper(make_allreduce_hook(pg));
                             }),
                             torch),
            0);
}

TEST(TorchGolden, Fp16HookMatchesExceptWhereTorchOverflowsOrDoubleRounds) {
  // Our fp16 hook divides in float32 before the one cast. With two ranks the
  // division is exact, so the results agree wherever both x / 2 values are
  // normal float16 numbers and x itself fits float16. Elsewhere torch's
  // cast overflowed (inf) or rounded twice in the subnormal range.
  std::vector<float> torch = read_golden("default_hooks_fp16.f32");
  std::vector<float> a = read_golden("default_hooks_input_rank0.f32");
  std::vector<float> b = read_golden("default_hooks_input_rank1.f32");
  std::vector<float> ours = run_on_golden_inputs(make_fp16_compress_hook);
  const float kMinNormal = 6.103515625e-05f;  // 2^-14
  auto differs_by_design = [&](size_t i) {
    for (float x : {a[i], b[i]}) {
      if (std::fabs(x) >= 65520.0f) return true;
      if (x != 0.0f && std::fabs(x / 2) < kMinNormal) return true;
    }
    return false;
  };
  EXPECT_EQ(count_mismatches(ours, torch, differs_by_design), 0);
  int64_t overflowed = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (std::fabs(a[i]) >= 65520.0f || std::fabs(b[i]) >= 65520.0f) {
      // The golden inputs put +1e5 on rank 0 and -1e5 on rank 1 there.
      EXPECT_FALSE(std::isfinite(torch[i])) << i;
      EXPECT_TRUE(std::isfinite(ours[i])) << i;
      ++overflowed;
    }
  }
  EXPECT_GT(overflowed, 0) << "the goldens should exercise float16 overflow";
}

}  // namespace
}  // namespace ddpx
