#include "process_group/gloo/half_reduce.h"

#include <immintrin.h>

#include <cstdint>

namespace ddpx {
namespace {

#define DDPX_F16C __attribute__((target("avx,f16c")))

// The vector forms of reduce_internal's ops, with the same choice on ties
// and NaNs: minps(x, y) is x < y ? x : y, as Min's `b < a ? b : a`.
struct VecSum { DDPX_F16C static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); } };
struct VecProduct { DDPX_F16C static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); } };
struct VecMin { DDPX_F16C static __m256 apply(__m256 a, __m256 b) { return _mm256_min_ps(b, a); } };
struct VecMax { DDPX_F16C static __m256 apply(__m256 a, __m256 b) { return _mm256_max_ps(b, a); } };

template <typename Vec, typename Scalar>
DDPX_F16C void reduce_half(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                     _mm256_cvtps_ph(Vec::apply(fx, fy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  reduce_internal::reduce3<Half, Scalar>(o + i, x + i, y + i, n - i);
}

}  // namespace

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

UntypedReduceFn half_reduce_f16c(ReduceOp op) {
  using namespace reduce_internal;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return &reduce_half<VecSum, Sum>;
    case ReduceOp::PRODUCT: return &reduce_half<VecProduct, Product>;
    case ReduceOp::MIN: return &reduce_half<VecMin, Min>;
    case ReduceOp::MAX: return &reduce_half<VecMax, Max>;
    default: return nullptr;
  }
}

}  // namespace ddpx
