#include "process_group/gloo/reduce_kernels.h"

#include "process_group/gloo/half_reduce.h"

namespace ddpx {

UntypedReduceFn reduce_function(DType dtype, ReduceOp op) {
  if (dtype == DType::kFloat16 && cpu_has_f16c()) {
    if (UntypedReduceFn fast = half_reduce_f16c(op)) return fast;
  }
  return visit_dtype(dtype, [op](auto zero) -> UntypedReduceFn {
    using namespace reduce_internal;
    using T = decltype(zero);
    using A = typename Accum<T>::type;
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: return &reduce3<T, Sum>;
      case ReduceOp::PRODUCT: return &reduce3<T, Product>;
      case ReduceOp::MIN: return &reduce3<T, Min>;
      case ReduceOp::MAX: return &reduce3<T, Max>;
      default: break;
    }
    if constexpr (std::is_integral_v<A>) {
      switch (op) {
        case ReduceOp::BAND: return &reduce3<T, BitAnd>;
        case ReduceOp::BOR: return &reduce3<T, BitOr>;
        case ReduceOp::BXOR: return &reduce3<T, BitXor>;
        default: break;
      }
    }
    return nullptr;
  });
}

void divide_in_place(void* data, size_t n, DType dtype, int64_t divisor) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    using A = typename reduce_internal::Accum<T>::type;
    T* p = static_cast<T*>(data);
    const A d = static_cast<A>(divisor);
    for (size_t i = 0; i < n; ++i) {
      p[i] = static_cast<T>(static_cast<A>(static_cast<A>(p[i]) / d));
    }
  });
}

}  // namespace ddpx
