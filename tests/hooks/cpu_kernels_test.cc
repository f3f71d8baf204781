// The vectorized kernels against half.h's scalar conversions, bit for bit,
// and the int8 record format against its documented error bound.
#include "hooks/kernels/cpu_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "core/half.h"

namespace ddpx {
namespace kernels {
namespace {

constexpr Isa kAvx2 = Isa::kAvx2F16c;
constexpr Isa kScalar = Isa::kScalar;

#define SKIP_WITHOUT_AVX2()                                             \
  if (!isa_supported(kAvx2)) GTEST_SKIP() << "this CPU lacks AVX2/F16C; " \
                                             "only the scalar path runs"

uint32_t bits_of(float f) { return float_bits(f); }

// Floats that stress rounding: specials, both zeros, subnormals of float and
// of half, every float16/bfloat16 tie around a spread of exponents, the
// overflow boundary, and random bit patterns (which include NaN payloads).
std::vector<float> tricky_floats() {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::max(), 65504.0f, 65519.99f, 65520.0f,
                  65536.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 6.1035156e-5f,
                  6.1035153e-5f, 1.0f, -1.0f, 1e5f, -1e5f, 3.0e38f}) {
    v.push_back(f);
  }
  // NaNs with payloads in the high and low mantissa bits, signalling too.
  for (uint32_t b : {0x7f800001u, 0x7fbfffffu, 0x7fc00001u, 0x7fffffffu, 0xff800001u,
                     0xffc12345u, 0x7fa00000u, 0xffe00000u}) {
    v.push_back(bits_float(b));
  }
  for (int e = 90; e <= 160; ++e) {
    for (uint32_t low : {0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0x7fffu, 0x8000u,
                         0x8001u, 0x18000u, 0u, 0x1fffu, 0x2000u}) {
      for (uint32_t mant_hi : {0u, 0x2000u, 0x7fe000u, 0x400000u, 0x10000u}) {
        uint32_t b = (static_cast<uint32_t>(e) << 23) | mant_hi | low;
        v.push_back(bits_float(b));
        v.push_back(bits_float(b | 0x80000000u));
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) v.push_back(bits_float(rng()));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 50000; ++i) v.push_back(normal(rng) * 1e-4f);
  return v;
}

TEST(HalfCast, AllHalfBitPatternsWidenLikeHalfH) {
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (Isa isa : {kScalar, kAvx2}) {
    std::vector<float> out(all.size());
    half_to_float(all.data(), out.data(), static_cast<int64_t>(all.size()), isa);
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(bits_of(out[i]), bits_of(half_bits_to_float(all[i])))
          << isa_name(isa) << " half 0x" << std::hex << all[i];
    }
  }
}

TEST(BFloat16Cast, AllBFloat16BitPatternsWidenLikeHalfH) {
  std::vector<uint16_t> all(65536 + 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (Isa isa : {kScalar, kAvx2}) {
    std::vector<float> out(all.size());
    bfloat16_to_float(all.data(), out.data(), static_cast<int64_t>(all.size()), isa);
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(bits_of(out[i]), bits_of(bfloat16_bits_to_float(all[i])))
          << isa_name(isa) << " bf16 0x" << std::hex << all[i];
    }
  }
}

class NarrowingCast : public ::testing::TestWithParam<float> {};

TEST_P(NarrowingCast, FloatToHalfMatchesHalfHOnBothPaths) {
  const float divisor = GetParam();
  std::vector<float> in = tricky_floats();
  for (Isa isa : {kScalar, kAvx2}) {
    std::vector<uint16_t> out(in.size());
    float_to_half(in.data(), out.data(), static_cast<int64_t>(in.size()), divisor, isa);
    for (size_t i = 0; i < in.size(); ++i) {
      float x = divisor == 1.0f ? in[i] : in[i] / divisor;
      ASSERT_EQ(out[i], float_to_half_bits(x))
          << isa_name(isa) << " input bits 0x" << std::hex << bits_of(in[i])
          << " divisor " << divisor;
    }
  }
}

TEST_P(NarrowingCast, FloatToBFloat16MatchesHalfHOnBothPaths) {
  const float divisor = GetParam();
  std::vector<float> in = tricky_floats();
  for (Isa isa : {kScalar, kAvx2}) {
    std::vector<uint16_t> out(in.size());
    float_to_bfloat16(in.data(), out.data(), static_cast<int64_t>(in.size()), divisor, isa);
    for (size_t i = 0; i < in.size(); ++i) {
      float x = divisor == 1.0f ? in[i] : in[i] / divisor;
      ASSERT_EQ(out[i], float_to_bfloat16_bits(x))
          << isa_name(isa) << " input bits 0x" << std::hex << bits_of(in[i])
          << " divisor " << divisor;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Divisors, NarrowingCast,
                         ::testing::Values(1.0f, 2.0f, 3.0f, 4.0f, 7.0f));

TEST(HalfCast, DividingFirstKeepsLargeGradientsFinite) {
  // 1e5 overflows float16 (max 65504); 1e5 / 4 does not.
  std::vector<float> in(37, 1e5f);
  std::vector<uint16_t> out(in.size());
  float_to_half(in.data(), out.data(), 37, 4.0f);
  // 25000 lies halfway between halves 24992 and 25008; ties go to even.
  for (uint16_t h : out) EXPECT_EQ(half_bits_to_float(h), 24992.0f);
  float_to_half(in.data(), out.data(), 37, 1.0f);
  EXPECT_TRUE(std::isinf(half_bits_to_float(out[0])));
}

TEST(Casts, EveryLengthAgreesBetweenPaths) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> in(n);
    for (auto& x : in) x = normal(rng);
    std::vector<uint16_t> a(n + 1, 0xabcd), b(n + 1, 0xabcd);
    float_to_half(in.data(), a.data(), n, 3.0f, kScalar);
    float_to_half(in.data(), b.data(), n, 3.0f, kAvx2);
    ASSERT_EQ(a, b) << "n=" << n;  // includes the untouched sentinel
    float_to_bfloat16(in.data(), a.data(), n, 3.0f, kScalar);
    float_to_bfloat16(in.data(), b.data(), n, 3.0f, kAvx2);
    ASSERT_EQ(a, b) << "n=" << n;
  }
}

TEST(ReductionHelpers, DivideAndAddMatchScalarBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n : {0, 1, 7, 8, 9, 31, 1000, 1027}) {
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = normal(rng);
    for (auto& v : y) v = normal(rng);
    for (Isa isa : {kScalar, kAvx2}) {
      std::vector<float> d = x, s = x, into(n, -1.0f);
      divide(d.data(), n, 3.0f, isa);
      divide_into(x.data(), into.data(), n, 3.0f, isa);
      add_into(s.data(), y.data(), n, isa);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits_of(d[i]), bits_of(x[i] / 3.0f)) << isa_name(isa);
        ASSERT_EQ(bits_of(into[i]), bits_of(x[i] / 3.0f)) << isa_name(isa);
        ASSERT_EQ(bits_of(s[i]), bits_of(x[i] + y[i])) << isa_name(isa);
      }
    }
  }
}

// ---- int8 ------------------------------------------------------------------

float header_min(const std::vector<uint8_t>& r) {
  float f;
  memcpy(&f, r.data(), 4);
  return f;
}
float header_max(const std::vector<uint8_t>& r) {
  float f;
  memcpy(&f, r.data() + 4, 4);
  return f;
}

std::vector<uint8_t> quantized(const std::vector<float>& x, Isa isa) {
  std::vector<uint8_t> r(quantized_record_bytes(static_cast<int64_t>(x.size())));
  quantize(x.data(), static_cast<int64_t>(x.size()), r.data(), isa);
  return r;
}

TEST(Int8Quantize, RecordHoldsMinMaxAndCodesSpanTheRange) {
  std::vector<float> x = {0.5f, -2.0f, 3.0f, 1.0f, 0.5f};
  for (Isa isa : {kScalar, kAvx2}) {
    auto r = quantized(x, isa);
    ASSERT_EQ(r.size(), 8u + 5u);
    EXPECT_EQ(header_min(r), -2.0f);
    EXPECT_EQ(header_max(r), 3.0f);
    EXPECT_EQ(r[8 + 1], 0);    // the min
    EXPECT_EQ(r[8 + 2], 255);  // the max
    // 1.0 sits at 3/5 of the range: 153 of 255.
    EXPECT_EQ(r[8 + 3], 153);
  }
}

TEST(Int8Quantize, BothPathsWriteIdenticalRecordsAndDecodeIdentically) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(5);
  for (int64_t n : {1, 2, 31, 32, 33, 63, 64, 65, 100, 4097, 100003}) {
    for (float scale : {1e-6f, 1.0f, 1e4f}) {
      std::normal_distribution<float> normal(0.3f * scale, scale);
      std::vector<float> x(n);
      for (auto& v : x) v = normal(rng);
      auto a = quantized(x, kScalar), b = quantized(x, kAvx2);
      ASSERT_EQ(a, b) << "n=" << n << " scale=" << scale;
      std::vector<float> da(n), db(n);
      dequantize(a.data(), n, da.data(), kScalar);
      dequantize(a.data(), n, db.data(), kAvx2);
      ASSERT_EQ(0, memcmp(da.data(), db.data(), n * sizeof(float)));
      std::vector<float> aa = x, ab = x;
      dequantize_add(a.data(), n, aa.data(), kScalar);
      dequantize_add(a.data(), n, ab.data(), kAvx2);
      ASSERT_EQ(0, memcmp(aa.data(), ab.data(), n * sizeof(float)));
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(aa[i], x[i] + da[i]);
    }
  }
}

TEST(Int8Quantize, DecodeErrorIsAtMostHalfAStep) {
  std::mt19937 rng(9);
  for (Isa isa : {kScalar, kAvx2}) {
    for (float scale : {1e-3f, 1.0f, 1e5f}) {
      std::uniform_real_distribution<float> uni(-scale, 2 * scale);
      std::vector<float> x(10007);
      for (auto& v : x) v = uni(rng);
      auto r = quantized(x, isa);
      std::vector<float> y(x.size());
      dequantize(r.data(), static_cast<int64_t>(x.size()), y.data(), isa);
      const float step = quantization_step(r.data());
      EXPECT_NEAR(step, (header_max(r) - header_min(r)) / 255.0f, 1e-6f * step + 1e-9f);
      for (size_t i = 0; i < x.size(); ++i) {
        // Half a step, plus a few ulps of the float arithmetic.
        ASSERT_LE(std::fabs(x[i] - y[i]), 0.5f * step + 4e-7f * scale * 3)
            << isa_name(isa) << " element " << i;
      }
    }
  }
}

TEST(Int8Quantize, ConstantChunkDecodesExactlyAndNegativeZeroIsCanonical) {
  for (Isa isa : {kScalar, kAvx2}) {
    std::vector<float> x(77, -3.25f);
    auto r = quantized(x, isa);
    std::vector<float> y(77);
    dequantize(r.data(), 77, y.data(), isa);
    for (float v : y) ASSERT_EQ(v, -3.25f);
    std::vector<float> zeros(40, -0.0f);
    zeros[3] = 0.0f;
    auto z = quantized(zeros, isa);
    EXPECT_EQ(bits_of(header_min(z)), 0u) << isa_name(isa);
    EXPECT_EQ(bits_of(header_max(z)), 0u) << isa_name(isa);
  }
}

TEST(Int8Quantize, NonFiniteChunkDecodesToNaN) {
  for (Isa isa : {kScalar, kAvx2}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(50, 1.0f);
      x[41] = bad;
      auto r = quantized(x, isa);
      std::vector<float> y(50);
      dequantize(r.data(), 50, y.data(), isa);
      for (float v : y) ASSERT_TRUE(std::isnan(v)) << isa_name(isa);
    }
  }
}

// The average's record straight from the sum: the same bytes as dividing
// first, for values that stress the division (zeros of both signs,
// subnormals, infinities, NaN) and every tail length of the vector loop.
TEST(Int8Quantize, QuantizeDividedWritesTheRecordOfTheDividedValues) {
  std::vector<float> pool = tricky_floats();
  std::mt19937 rng(11);
  for (Isa isa : {kScalar, kAvx2}) {
    if (!isa_supported(isa)) continue;
    for (float divisor : {1.0f, 2.0f, 3.0f, 6.0f, 0.5f}) {
      for (int64_t n : {1, 7, 31, 32, 33, 65, 1000, 4099}) {
        for (int trial = 0; trial < 6; ++trial) {
          std::vector<float> x(n);
          std::normal_distribution<float> normal(0.0f, 1e-3f);
          for (auto& v : x) v = normal(rng);
          // Trial 0: normal values only; later ones mix in tricky values
          // (the last ones: finite tricky values only, so codes matter).
          if (trial > 0) {
            for (int k = 0; k < 3; ++k) {
              float t = pool[rng() % pool.size()];
              if (trial >= 4 && !std::isfinite(t)) t = -0.0f;
              x[rng() % n] = t;
            }
          }
          std::vector<float> divided = x;
          divide(divided.data(), n, divisor, kScalar);
          const std::vector<uint8_t> want = quantized(divided, kScalar);
          std::vector<uint8_t> got(want.size());
          quantize_divided(x.data(), n, divisor, got.data(), isa);
          ASSERT_EQ(want, got) << isa_name(isa) << " n=" << n << " divisor=" << divisor
                               << " trial=" << trial;
        }
      }
    }
  }
}

// Summing records block by block gives the bits of zero + each record in
// turn, over block boundaries and with a NaN record among them.
TEST(Int8Quantize, DequantizeSumEqualsAddingEachRecordToZero) {
  std::mt19937 rng(13);
  for (Isa isa : {kScalar, kAvx2}) {
    if (!isa_supported(isa)) continue;
    for (int count : {1, 2, 3, 6}) {
      for (int64_t n : {1, 9, 2047, 2048, 2049, 5000}) {
        for (bool with_nan : {false, true}) {
          std::vector<std::vector<uint8_t>> records;
          std::vector<const uint8_t*> pointers;
          for (int r = 0; r < count; ++r) {
            std::normal_distribution<float> normal(0.1f * r, 1.0f + r);
            std::vector<float> x(n);
            for (auto& v : x) v = normal(rng);
            if (with_nan && r == count - 1) x[n / 2] = std::numeric_limits<float>::quiet_NaN();
            records.push_back(quantized(x, kScalar));
          }
          for (const auto& r : records) pointers.push_back(r.data());
          std::vector<float> want(n, 0.0f), got(n, 42.0f);
          for (const auto& r : records) dequantize_add(r.data(), n, want.data(), kScalar);
          dequantize_sum(pointers.data(), count, n, got.data(), isa);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(bits_of(want[i]), bits_of(got[i]))
                << isa_name(isa) << " count=" << count << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(Int8Quantize, EmptyChunkWritesOnlyTheHeader) {
  uint8_t r[8];
  quantize(nullptr, 0, r, kScalar);
  EXPECT_EQ(quantization_step(r), kQuantizeEpsilon / 255.0f);
}

}  // namespace
}  // namespace kernels
}  // namespace ddpx
