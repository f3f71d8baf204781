// Element-wise reduction kernels for every dtype and ReduceOp, in the two
// shapes Gloo asks for: the unbound-buffer algorithms take
// void(out, a, b, n) on untyped pointers, the classic algorithm classes take
// a gloo::ReductionFunction<T>. float16 and bfloat16 reduce in float and round
// back once per pairwise step.
#ifndef DDPX_PROCESS_GROUP_GLOO_REDUCE_KERNELS_H_
#define DDPX_PROCESS_GROUP_GLOO_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "gloo/algorithm.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/options.h"

namespace ddpx {

// Calls f(T{}) with T the C++ element type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kFloat16: return f(Half{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kInt8: return f(int8_t{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
  }
  std::abort();  // unreachable: every DType is listed above
}

using UntypedReduceFn = void (*)(void* out, const void* a, const void* b,
                                 size_t n);

// out[i] = a[i] op b[i] (out may equal a). AVG reduces as SUM; the caller
// divides afterwards (divide_in_place). Bitwise ops on floating dtypes are
// refused by the front end; here they return null.
UntypedReduceFn reduce_function(DType dtype, ReduceOp op);

// data[i] /= divisor (integer division for integer dtypes, like torch's
// floor-free truncation on integer tensors).
void divide_in_place(void* data, size_t n, DType dtype, int64_t divisor);

namespace reduce_internal {

template <typename T>
struct Accum { using type = T; };
template <>
struct Accum<Half> { using type = float; };
template <>
struct Accum<BFloat16> { using type = float; };

struct Sum { template <typename A> static A apply(A a, A b) { return static_cast<A>(a + b); } };
struct Product { template <typename A> static A apply(A a, A b) { return static_cast<A>(a * b); } };
struct Min { template <typename A> static A apply(A a, A b) { return b < a ? b : a; } };
struct Max { template <typename A> static A apply(A a, A b) { return a < b ? b : a; } };
struct BitAnd { template <typename A> static A apply(A a, A b) { return static_cast<A>(a & b); } };
struct BitOr { template <typename A> static A apply(A a, A b) { return static_cast<A>(a | b); } };
struct BitXor { template <typename A> static A apply(A a, A b) { return static_cast<A>(a ^ b); } };

template <typename T, typename Op>
void reduce3(void* out, const void* a, const void* b, size_t n) {
  using A = typename Accum<T>::type;
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    o[i] = static_cast<T>(Op::apply(static_cast<A>(x[i]), static_cast<A>(y[i])));
  }
}

template <typename T, typename Op>
void reduce2(T* a, const T* b, size_t n) {
  reduce3<T, Op>(a, a, b, n);
}

template <typename T, typename Op>
const gloo::ReductionFunction<T>* classic(gloo::ReductionType type) {
  static const gloo::ReductionFunction<T> fn(type, &reduce2<T, Op>);
  return &fn;
}

}  // namespace reduce_internal

// The same kernels as a gloo::ReductionFunction<T> for AllreduceRing & co.
// Returns null for a bitwise op on a floating type.
template <typename T>
const gloo::ReductionFunction<T>* classic_reduction(ReduceOp op) {
  using namespace reduce_internal;
  using A = typename Accum<T>::type;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return classic<T, Sum>(gloo::SUM);
    case ReduceOp::PRODUCT: return classic<T, Product>(gloo::PRODUCT);
    case ReduceOp::MIN: return classic<T, Min>(gloo::MIN);
    case ReduceOp::MAX: return classic<T, Max>(gloo::MAX);
    default: break;
  }
  if constexpr (std::is_integral_v<A>) {
    switch (op) {
      case ReduceOp::BAND: return classic<T, BitAnd>(gloo::CUSTOM);
      case ReduceOp::BOR: return classic<T, BitOr>(gloo::CUSTOM);
      case ReduceOp::BXOR: return classic<T, BitXor>(gloo::CUSTOM);
      default: break;
    }
  }
  return nullptr;
}

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_REDUCE_KERNELS_H_
