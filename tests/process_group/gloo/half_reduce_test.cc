// The F16C float16 reductions give the portable kernels' bits for every
// float16 value against a spread of others (NaNs excepted: they stay NaN).
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/gloo/half_reduce.h"

namespace ddpx {
namespace {

bool is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(HalfReduce, F16cGivesThePortableBitsForEveryValue) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "SKIPPED LOUDLY: this CPU has no F16C; nothing to compare";
  std::vector<uint16_t> a(65536 + 5), b(a.size());
  std::mt19937 gen(3);
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
    UntypedReduceFn fast = half_reduce_f16c(op);
    ASSERT_NE(fast, nullptr);
    UntypedReduceFn portable = nullptr;
    using namespace reduce_internal;
    switch (op) {
      case ReduceOp::SUM: portable = &reduce3<Half, Sum>; break;
      case ReduceOp::PRODUCT: portable = &reduce3<Half, Product>; break;
      case ReduceOp::MIN: portable = &reduce3<Half, Min>; break;
      default: portable = &reduce3<Half, Max>; break;
    }
    for (int round = 0; round < 24; ++round) {
      // Every value once (5 more for a tail that is no multiple of 8),
      // against random values: subnormals, infinities, ties and overflow.
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<uint16_t>(i);
        b[i] = static_cast<uint16_t>(round < 4 ? (i * 7919 + round) : gen());
      }
      std::vector<uint16_t> want(a.size()), got(a.size());
      portable(want.data(), a.data(), b.data(), a.size());
      fast(got.data(), a.data(), b.data(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        if (is_nan(want[i]) || is_nan(a[i]) || is_nan(b[i])) {
          ASSERT_TRUE(is_nan(got[i]) || !is_nan(want[i])) << i;
          continue;
        }
        ASSERT_EQ(got[i], want[i]) << reduce_op_name(op) << " of 0x" << std::hex << a[i]
                                   << " and 0x" << b[i];
      }
    }
  }
  EXPECT_EQ(half_reduce_f16c(ReduceOp::BAND), nullptr);
}

}  // namespace
}  // namespace ddpx
