// Inputs and expected results for allreduce tests: values chosen so every
// reduction is exact in every dtype.
#ifndef DDPX_TESTS_PROCESS_GROUP_GLOO_ALLREDUCE_VALUES_H_
#define DDPX_TESTS_PROCESS_GROUP_GLOO_ALLREDUCE_VALUES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "process_group/gloo/reduce_kernels.h"
#include "core/tensor.h"

namespace ddpx {
namespace gloo_test {

// Rank r's element i, chosen so every reduction is exact in every dtype
// (small integers; products of 1s and 2s).
inline int64_t input_value(ReduceOp op, int rank, int64_t i) {
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

inline int64_t expected_value(ReduceOp op, int size, int64_t i) {
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

inline double expected_result(ReduceOp op, DType dtype, int size, int64_t i) {
  int64_t v = expected_value(op, size, i);
  if (op != ReduceOp::AVG) return static_cast<double>(v);
  if (is_floating_point(dtype)) return static_cast<double>(v) / size;
  return static_cast<double>(v / size);  // integer AVG truncates
}

inline Tensor make_input(ReduceOp op, DType dtype, int rank, int64_t n) {
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
inline bool op_applies(ReduceOp op, DType dtype) {
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

inline void expect_result(const Tensor& t, ReduceOp op, int size, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    double want = expected_result(op, t.dtype(), size, i);
    double tol = t.dtype() == DType::kFloat16 || t.dtype() == DType::kBFloat16
                     ? 0.02 * std::abs(want) : 1e-9;
    ASSERT_NEAR(t.item(i), want, tol) << what << " element " << i;
  }
}

}  // namespace gloo_test
}  // namespace ddpx

#endif  // DDPX_TESTS_PROCESS_GROUP_GLOO_ALLREDUCE_VALUES_H_
