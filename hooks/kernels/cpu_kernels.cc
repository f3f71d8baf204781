// Chooses the kernel path and does the per-call work shared by both paths:
// the quantization record's header, its scale and step, and NaN records.
#include "hooks/kernels/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "hooks/kernels/kernel_paths.h"

namespace ddpx {
namespace kernels {
namespace {

Isa detect_isa() {
  const char* forced = std::getenv("DDPX_CPU_KERNELS");
  if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return Isa::kScalar;
  return isa_supported(Isa::kAvx2F16c) ? Isa::kAvx2F16c : Isa::kScalar;
}

// Falls back to the scalar path when asked for a path this CPU lacks, so a
// caller can never execute an illegal instruction.
bool use_avx2(Isa isa) {
#if defined(__x86_64__)
  return isa == Isa::kAvx2F16c && isa_supported(Isa::kAvx2F16c);
#else
  (void)isa;
  return false;
#endif
}

#if defined(__x86_64__)
#define DDPX_DISPATCH(isa, fn, ...)                                    \
  (use_avx2(isa) ? avx2_path::fn(__VA_ARGS__) : scalar_path::fn(__VA_ARGS__))
#else
#define DDPX_DISPATCH(isa, fn, ...) scalar_path::fn(__VA_ARGS__)
#endif

float read_float(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return f;
}

void write_float(uint8_t* p, float f) { std::memcpy(p, &f, sizeof(f)); }

float scale_of(float min, float max) {
  return 255.0f / ((max - min) + kQuantizeEpsilon);
}

float step_of(float min, float max) {
  return ((max - min) + kQuantizeEpsilon) / 255.0f;
}

bool finite_header(float min, float max) {
  return std::isfinite(min) && std::isfinite(max);
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2F16c:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

const char* isa_name(Isa isa) {
  return isa == Isa::kAvx2F16c ? "avx2+f16c" : "scalar";
}

void float_to_half(const float* src, uint16_t* dst, int64_t n, float divisor,
                   Isa isa) {
  DDPX_DISPATCH(isa, float_to_half, src, dst, n, divisor);
}

void half_to_float(const uint16_t* src, float* dst, int64_t n, Isa isa) {
  DDPX_DISPATCH(isa, half_to_float, src, dst, n);
}

void float_to_bfloat16(const float* src, uint16_t* dst, int64_t n,
                       float divisor, Isa isa) {
  DDPX_DISPATCH(isa, float_to_bfloat16, src, dst, n, divisor);
}

void bfloat16_to_float(const uint16_t* src, float* dst, int64_t n, Isa isa) {
  DDPX_DISPATCH(isa, bfloat16_to_float, src, dst, n);
}

void divide(float* data, int64_t n, float divisor, Isa isa) {
  DDPX_DISPATCH(isa, divide, data, data, n, divisor);
}

void divide_into(const float* src, float* dst, int64_t n, float divisor, Isa isa) {
  DDPX_DISPATCH(isa, divide, src, dst, n, divisor);
}

void add_into(float* acc, const float* src, int64_t n, Isa isa) {
  DDPX_DISPATCH(isa, add_into, acc, src, n);
}

MinMax min_max(const float* src, int64_t n, Isa isa) {
  if (n <= 0) return {0.0f, 0.0f};
  float lo, hi;
  bool any_nan;
  DDPX_DISPATCH(isa, min_max, src, n, &lo, &hi, &any_nan);
  if (any_nan) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    return {nan, nan};
  }
  // +0.0f turns -0 into +0, so both paths store the same bytes however
  // their comparisons ordered equal zeros.
  return {lo + 0.0f, hi + 0.0f};
}

void quantize(const float* src, int64_t n, uint8_t* out, Isa isa) {
  quantize_divided(src, n, 1.0f, out, isa);
}

void quantize_divided(const float* src, int64_t n, float divisor, uint8_t* out, Isa isa) {
  MinMax mm = min_max(src, n, isa);
  // Rounding is monotonic, so the quotients' min and max are the min's and
  // max's quotients (NaN stays NaN; the +0.0f of min_max already ran, and
  // -0 / d is -0, so it runs again).
  if (divisor != 1.0f) mm = {mm.min / divisor + 0.0f, mm.max / divisor + 0.0f};
  write_float(out, mm.min);
  write_float(out + 4, mm.max);
  if (n <= 0) return;
  DDPX_DISPATCH(isa, quantize_codes, src, n, divisor, mm.min, scale_of(mm.min, mm.max),
                out + kQuantizedHeaderBytes);
}

float quantization_step(const uint8_t* record) {
  return step_of(read_float(record), read_float(record + 4));
}

namespace {
// Decodes values [begin, begin + n) of a record into dst[0, n).
void decode_part(const uint8_t* record, int64_t begin, int64_t n, float* dst, bool accumulate,
                 Isa isa) {
  if (n <= 0) return;
  float min = read_float(record), max = read_float(record + 4);
  if (!finite_header(min, max)) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < n; ++i) dst[i] = nan;
    return;
  }
  DDPX_DISPATCH(isa, dequantize_codes, record + kQuantizedHeaderBytes + begin, n, min,
                step_of(min, max), dst, accumulate);
}

void decode(const uint8_t* record, int64_t n, float* dst, bool accumulate, Isa isa) {
  decode_part(record, 0, n, dst, accumulate, isa);
}
}  // namespace

void dequantize(const uint8_t* record, int64_t n, float* dst, Isa isa) {
  decode(record, n, dst, /*accumulate=*/false, isa);
}

void dequantize_add(const uint8_t* record, int64_t n, float* acc, Isa isa) {
  decode(record, n, acc, /*accumulate=*/true, isa);
}

void dequantize_sum(const uint8_t* const* records, int count, int64_t n, float* dst, Isa isa) {
  // Block by block, so that each block of dst stays in L1 while every
  // record adds into it: dst is written to memory once. The first record
  // is stored, not added to zero: a decoded value is never -0 (code * step
  // is +0 or more, and min is stored as +0), so 0 + x is x bit for bit.
  constexpr int64_t kBlock = 2048;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t len = std::min(kBlock, n - begin);
    for (int r = 0; r < count; ++r) {
      decode_part(records[r], begin, len, dst + begin, /*accumulate=*/r > 0, isa);
    }
  }
  if (count == 0) std::fill(dst, dst + n, 0.0f);
}

}  // namespace kernels
}  // namespace ddpx
