// CPU kernels behind the compression hooks: float32 <-> float16/bfloat16
// casts (optionally fused with the divide-by-world-size), float helpers for
// reductions, and int8 min-max quantization (Bagua's ByteGrad: Bagua's "Low
// Precision Stochastic Gradient" documentation; Gan et al., VLDB 2022).
//
// Every kernel has a portable scalar path and an AVX2+F16C path chosen at run
// time (Isa below). Both paths give bit-identical results: the casts round to
// nearest even exactly like core/half.h (NaN -> quiet NaN of the
// same sign with the payload dropped, as half.h does), and the float math is
// the same sequence of IEEE operations (no FMA contraction) in both paths.
#ifndef DDPX_HOOKS_KERNELS_CPU_KERNELS_H_
#define DDPX_HOOKS_KERNELS_CPU_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "cuda/quantize_math.h"

namespace ddpx {
namespace kernels {

enum class Isa : uint8_t {
  kScalar,    // portable C++
  kAvx2F16c,  // x86-64 with AVX2 and F16C
};

// The best path this CPU supports, detected once. Setting the environment
// variable DDPX_CPU_KERNELS=scalar forces the portable path (for comparison).
Isa best_isa();
bool isa_supported(Isa isa);
// "scalar", "avx2+f16c".
const char* isa_name(Isa isa);

// ---- casts -------------------------------------------------------------
// dst[i] = float16(src[i] / divisor), round to nearest even. With divisor 1
// no division is done. Dividing in float32 before the cast is what keeps a
// large gradient (say 1e5 on each of 4 ranks) from overflowing float16.
void float_to_half(const float* src, uint16_t* dst, int64_t n,
                   float divisor = 1.0f, Isa isa = best_isa());
void half_to_float(const uint16_t* src, float* dst, int64_t n,
                   Isa isa = best_isa());
// Same for bfloat16.
void float_to_bfloat16(const float* src, uint16_t* dst, int64_t n,
                       float divisor = 1.0f, Isa isa = best_isa());
void bfloat16_to_float(const uint16_t* src, float* dst, int64_t n,
                       Isa isa = best_isa());

// ---- reduction helpers ---------------------------------------------------
// data[i] = data[i] / divisor (a true division, as torch's div_ does).
void divide(float* data, int64_t n, float divisor, Isa isa = best_isa());
// dst[i] = src[i] / divisor in one pass (the reducer's copy into its bucket).
void divide_into(const float* src, float* dst, int64_t n, float divisor,
                 Isa isa = best_isa());
// acc[i] = acc[i] + src[i].
void add_into(float* acc, const float* src, int64_t n, Isa isa = best_isa());

// ---- int8 min-max quantization -------------------------------------------
//
// Records in the one layout and arithmetic of cuda/quantize_math.h, which
// the CUDA kernels follow too: a chunk of n float32 values becomes
// quantized_record_bytes(n) = 8 + n bytes, [float32 min][float32 max][n
// uint8 codes], every float operation rounded alone (no FMA), so
// |x - x'| <= step / 2; a record whose min or max is not finite decodes to
// NaN everywhere.
using cuda_math::kQuantizeEpsilon;
inline constexpr size_t kQuantizedHeaderBytes =
    static_cast<size_t>(cuda_math::kQuantizedHeaderBytes);
inline constexpr size_t quantized_record_bytes(int64_t n) {
  return kQuantizedHeaderBytes + static_cast<size_t>(n);
}

struct MinMax {
  float min;
  float max;
};
// The chunk's min and max as the record stores them (see above). n == 0
// gives {0, 0}.
MinMax min_max(const float* src, int64_t n, Isa isa = best_isa());
// Writes the record of src[0..n) into out[0 .. quantized_record_bytes(n)).
void quantize(const float* src, int64_t n, uint8_t* out, Isa isa = best_isa());
// The record of src[i] / divisor (divisor > 0), the same bytes as divide()
// then quantize() without writing the quotients: an average is quantized
// straight from its sum.
void quantize_divided(const float* src, int64_t n, float divisor, uint8_t* out,
                      Isa isa = best_isa());
// Decodes a record of n values into dst.
void dequantize(const uint8_t* record, int64_t n, float* dst,
                Isa isa = best_isa());
// acc[i] = acc[i] + decoded[i]: summing many ranks' records without a
// temporary.
void dequantize_add(const uint8_t* record, int64_t n, float* acc,
                    Isa isa = best_isa());
// dst[i] = the sum of `count` records' decoded values, added in record order:
// the same bits as zeroing dst and calling dequantize_add for each record,
// with dst written once instead of count + 1 times.
void dequantize_sum(const uint8_t* const* records, int count, int64_t n, float* dst,
                    Isa isa = best_isa());
// The step of a record (its largest decode error is half of it).
float quantization_step(const uint8_t* record);

}  // namespace kernels
}  // namespace ddpx

#endif  // DDPX_HOOKS_KERNELS_CPU_KERNELS_H_
