// allreduce and allreduce_coalesced: every dtype, every reduce op, world
// sizes 1 to 5, every Gloo algorithm, zero-element and odd-sized tensors.
#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"
#include "process_group/gloo/reduce_kernels.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using testing::local_options;
using testing::run_ranks;
using testing::wait_ok;

// Rank r's element i, chosen so every reduction is exact in every dtype
// (small integers; products of 1s and 2s).
int64_t input_value(ReduceOp op, int rank, int64_t i) {
  switch (op) {
    case ReduceOp::PRODUCT: return 1 + ((rank + i) % 3 == 0 ? 1 : 0);
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: return ((rank + 1) * 37 + i * 11) & 0x7f;
    case ReduceOp::MIN:
    case ReduceOp::MAX: return ((rank * 7 + i * 3) % 23) - 11;
    default: return (rank + 1) + (i % 5);
  }
}

int64_t expected_value(ReduceOp op, int size, int64_t i) {
  int64_t acc = input_value(op, 0, i);
  for (int r = 1; r < size; ++r) {
    int64_t v = input_value(op, r, i);
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: acc += v; break;
      case ReduceOp::PRODUCT: acc *= v; break;
      case ReduceOp::MIN: acc = std::min(acc, v); break;
      case ReduceOp::MAX: acc = std::max(acc, v); break;
      case ReduceOp::BAND: acc &= v; break;
      case ReduceOp::BOR: acc |= v; break;
      case ReduceOp::BXOR: acc ^= v; break;
    }
  }
  return acc;
}

double expected_result(ReduceOp op, DType dtype, int size, int64_t i) {
  int64_t v = expected_value(op, size, i);
  if (op != ReduceOp::AVG) return static_cast<double>(v);
  if (is_floating_point(dtype)) return static_cast<double>(v) / size;
  return static_cast<double>(v / size);  // integer AVG truncates
}

Tensor make_input(ReduceOp op, DType dtype, int rank, int64_t n) {
  Tensor t = Tensor::zeros({n}, dtype);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data_as<T>();
    for (int64_t i = 0; i < n; ++i) {
      p[i] = static_cast<T>(static_cast<float>(input_value(op, rank, i)));
    }
  });
  return t;
}

// Unsigned types see negative MIN/MAX inputs wrapped; keep those ops on
// signed or floating dtypes.
bool op_applies(ReduceOp op, DType dtype) {
  bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && is_floating_point(dtype)) return false;
  if ((op == ReduceOp::MIN || op == ReduceOp::MAX) && dtype == DType::kUInt8) return false;
  return true;
}

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                DType::kBFloat16, DType::kInt8,   DType::kUInt8,
                                DType::kInt32,    DType::kInt64};
constexpr ReduceOp kAllOps[] = {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT,
                                ReduceOp::MIN, ReduceOp::MAX,  ReduceOp::BAND,
                                ReduceOp::BOR, ReduceOp::BXOR};

void expect_result(const Tensor& t, ReduceOp op, int size, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    double want = expected_result(op, t.dtype(), size, i);
    double tol = t.dtype() == DType::kFloat16 || t.dtype() == DType::kBFloat16
                     ? 0.02 * std::abs(want) : 1e-9;
    ASSERT_NEAR(t.item(i), want, tol) << what << " element " << i;
  }
}

class AllreduceWorldTest : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceWorldTest, EveryDTypeAndOp) {
  const int size = GetParam();
  run_ranks(size, [&](GlooBackend& b) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (!op_applies(op, dtype)) continue;
        // 37 elements: not a multiple of any world size or chunk count.
        Tensor t = make_input(op, dtype, b.rank(), 37);
        AllreduceOptions opts;
        opts.op = op;
        ASSERT_WORK_OK(b.allreduce({t}, opts));
        std::string what = std::string(dtype_name(dtype)) + " " + reduce_op_name(op);
        expect_result(t, op, size, what);
      }
    }
  });
}

TEST_P(AllreduceWorldTest, ZeroElementsAndMultipleTensors) {
  const int size = GetParam();
  run_ranks(size, [&](GlooBackend& b) {
    Tensor empty = Tensor::zeros({0}, DType::kFloat32);
    auto w = b.allreduce({empty}, {});
    ASSERT_TRUE(wait_ok(w).ok()) << w->exception();
    // Two tensors on one rank are reduced together, like torch's
    // multi-tensor allreduce: the result is the sum over ranks and tensors.
    Tensor a = Tensor::from_vector<float>({1, 2, 3});
    Tensor c = Tensor::from_vector<float>({10, 20, 30});
    ASSERT_WORK_OK(b.allreduce({a, c}, {}));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(a.item(i), 11.0 * (i + 1) * size);
      EXPECT_EQ(c.item(i), 11.0 * (i + 1) * size);
    }
  });
}

TEST_P(AllreduceWorldTest, CoalescedMatchesSeparateAllreduces) {
  const int size = GetParam();
  run_ranks(size, [&](GlooBackend& b) {
    TensorList tensors;
    const int64_t sizes[] = {1, 0, 7, 100, 3};
    for (int64_t n : sizes) tensors.push_back(make_input(ReduceOp::SUM, DType::kFloat32, b.rank(), n));
    AllreduceOptions opts;
    opts.op = ReduceOp::AVG;
    ASSERT_WORK_OK(b.allreduce_coalesced(tensors, opts));
    for (const Tensor& t : tensors) expect_result(t, ReduceOp::AVG, size, "coalesced");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllreduceWorldTest, ::testing::Range(1, 6));

struct AlgorithmCase {
  AllreduceAlgorithm algorithm;
  int size;
};

class AllreduceAlgorithmTest : public ::testing::TestWithParam<AlgorithmCase> {};

TEST_P(AllreduceAlgorithmTest, SumsAndBitwiseAcrossSizes) {
  const auto [algorithm, size] = GetParam();
  GlooOptions options = local_options();
  options.allreduce_algorithm = algorithm;
  run_ranks(size, [&](GlooBackend& b) {
    // Sizes around the algorithms' chunking: tiny, odd, several chunks.
    for (int64_t n : {1, 5, 257, 4099, 100003}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
        Tensor t = make_input(ReduceOp::SUM, dtype, b.rank(), n);
        ASSERT_WORK_OK(b.allreduce({t}, {}));
        expect_result(t, ReduceOp::SUM, size,
                      std::string(allreduce_algorithm_name(algorithm)) + " " +
                          dtype_name(dtype) + " n=" + std::to_string(n));
      }
      Tensor x = make_input(ReduceOp::BXOR, DType::kInt32, b.rank(), n);
      AllreduceOptions opts;
      opts.op = ReduceOp::BXOR;
      ASSERT_WORK_OK(b.allreduce({x}, opts));
      expect_result(x, ReduceOp::BXOR, size, "bxor");
    }
  });
}

std::vector<AlgorithmCase> algorithm_cases() {
  std::vector<AlgorithmCase> cases;
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    for (int size = 1; size <= 5; ++size) {
      // The bcube variants need a power-of-two world; the backend falls back
      // to gloo_ring elsewhere, which the test covers too.
      cases.push_back({a, size});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, AllreduceAlgorithmTest, ::testing::ValuesIn(algorithm_cases()),
    [](const ::testing::TestParamInfo<AlgorithmCase>& info) {
      return std::string(allreduce_algorithm_name(info.param.algorithm)) + "_" +
             std::to_string(info.param.size);
    });

TEST(AllreduceAlgorithmNames, RoundTripAndUnknownIsAnError) {
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    auto parsed = parse_allreduce_algorithm(allreduce_algorithm_name(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  auto bad = parse_allreduce_algorithm("tree");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tree"), std::string::npos);
  EXPECT_NE(bad.status().message().find("halving_doubling"), std::string::npos);
}

}  // namespace
}  // namespace ddpx
