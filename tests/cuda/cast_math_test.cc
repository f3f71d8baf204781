// The cast kernels' per-thread bodies, replayed for every thread of a grid
// on the CPU, against the CPU hooks' kernels (both of their paths: portable
// and AVX2+F16C, whose F16C conversion is the hardware's own rounding).
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cast_math.h"
#include "cuda/launch_math.h"
#include "gtest/gtest.h"
#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace {

using cuda_math::Half16;

// Every float class the casts must handle: normals, half subnormals, values
// that round to infinity, ties, NaNs, zeros of both signs.
std::vector<float> awkward_floats(size_t n) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, -65520.0f,
                          6.0e-8f, 2.9e-8f, 3.0e-8f, 1e-40f, 1e30f, -1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), bits_float(0xffc00001u),
                          bits_float(0x3f801000u), bits_float(0x3f803000u)};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  while (v.size() < n) v.push_back(bits_float(bits(rng)));
  v.resize(n);
  return v;
}

template <Half16 kind>
std::vector<uint16_t> replay_from_float(const float* in, int64_t n, int threads_per_block) {
  std::vector<uint16_t> out(n + 8);  // +8: the replay may start misaligned
  uint16_t* dst = out.data();
  const int blocks = cuda_math::grid_blocks((n + 3) / 4, threads_per_block);
  const int64_t nthreads = static_cast<int64_t>(blocks) * threads_per_block;
  for (int64_t t = 0; t < nthreads; ++t)
    cuda_math::cast_from_float_thread<kind>(in, dst, n, t, nthreads);
  out.resize(n);
  return out;
}

bool same_bits_or_both_nan16(uint16_t a, uint16_t b, Half16 kind) {
  float fa = kind == Half16::kFloat16 ? half_bits_to_float(a) : bfloat16_bits_to_float(a);
  float fb = kind == Half16::kFloat16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
  return a == b || (fa != fa && fb != fb);
}

TEST(CastMath, FloatToHalfMatchesCpuKernelsOnEveryThreadLayout) {
  for (int64_t n : {0, 1, 3, 4, 5, 1023, 4099}) {
    std::vector<float> in = awkward_floats(n);
    std::vector<uint16_t> scalar(n), avx(n);
    kernels::float_to_half(in.data(), scalar.data(), n, 1.0f, kernels::Isa::kScalar);
    kernels::float_to_half(in.data(), avx.data(), n, 1.0f, kernels::best_isa());
    for (int threads : {1, 32, 256}) {
      std::vector<uint16_t> gpu = replay_from_float<Half16::kFloat16>(in.data(), n, threads);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits_or_both_nan16(gpu[i], scalar[i], Half16::kFloat16))
            << "element " << i << " of " << n << " = " << in[i] << ": " << gpu[i] << " vs "
            << scalar[i];
        ASSERT_TRUE(same_bits_or_both_nan16(gpu[i], avx[i], Half16::kFloat16)) << i;
      }
    }
  }
}

TEST(CastMath, FloatToBfloat16MatchesCpuKernels) {
  const int64_t n = 5001;
  std::vector<float> in = awkward_floats(n);
  std::vector<uint16_t> cpu(n);
  kernels::float_to_bfloat16(in.data(), cpu.data(), n, 1.0f, kernels::Isa::kScalar);
  std::vector<uint16_t> gpu = replay_from_float<Half16::kBFloat16>(in.data(), n, 256);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_bits_or_both_nan16(gpu[i], cpu[i], Half16::kBFloat16)) << i;
}

TEST(CastMath, Bfloat16RoundsToTheNearestNeighbourTiesToEven) {
  // Independent of half.h: pick the nearer of the two bfloat16 neighbours
  // in double arithmetic.
  std::vector<float> in = awkward_floats(20000);
  for (float x : in) {
    if (x != x || std::isinf(x)) continue;
    const uint32_t bits = float_bits(x);
    const uint32_t down = bits & 0xffff0000u;
    const uint32_t up = down + 0x10000u;
    const double d_down = std::fabs(static_cast<double>(bits_float(down)) - x);
    // Past the largest finite value the next step up is 2^128 (IEEE rounds
    // to infinity from there).
    const double up_value = (up & 0x7f800000u) == 0x7f800000u
                                ? std::copysign(std::ldexp(1.0, 128), x)
                                : static_cast<double>(bits_float(up));
    const double d_up = std::fabs(up_value - x);
    uint32_t expected = d_down < d_up ? down : d_up < d_down ? up
                        : ((down >> 16) & 1u) == 0 ? down : up;
    uint16_t got = 0;
    cuda_math::cast_from_float_thread<Half16::kBFloat16>(&x, &got, 1, 0, 1);
    ASSERT_EQ(got, expected >> 16) << x;
  }
}

TEST(CastMath, ToFloatIsExactForEveryBitPattern) {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (Half16 kind : {Half16::kFloat16, Half16::kBFloat16}) {
    std::vector<float> cpu(all.size()), gpu(all.size());
    if (kind == Half16::kFloat16) {
      kernels::half_to_float(all.data(), cpu.data(), all.size(), kernels::Isa::kScalar);
    } else {
      kernels::bfloat16_to_float(all.data(), cpu.data(), all.size(), kernels::Isa::kScalar);
    }
    const int64_t nthreads = 37;  // odd on purpose: uneven shares
    for (int64_t t = 0; t < nthreads; ++t) {
      if (kind == Half16::kFloat16) {
        cuda_math::cast_to_float_thread<Half16::kFloat16>(all.data(), gpu.data(), all.size(), t,
                                                          nthreads);
      } else {
        cuda_math::cast_to_float_thread<Half16::kBFloat16>(all.data(), gpu.data(), all.size(), t,
                                                           nthreads);
      }
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (cpu[i] != cpu[i]) {
        ASSERT_NE(gpu[i], gpu[i]) << i;
      } else {
        ASSERT_EQ(float_bits(gpu[i]), float_bits(cpu[i])) << "bits " << i;
      }
    }
  }
}

TEST(CastMath, MisalignedPointersTakeTheScalarPathAndStillCoverEverything) {
  std::vector<float> storage = awkward_floats(1001);
  const float* in = storage.data() + 1;  // 4-byte aligned, not 16
  const int64_t n = 1000;
  EXPECT_EQ(cuda_math::vector_elems(in, storage.data(), n), 0);
  std::vector<uint16_t> gpu = replay_from_float<Half16::kFloat16>(in, n, 64);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_bits_or_both_nan16(gpu[i], float_to_half_bits(in[i]), Half16::kFloat16));
}

TEST(LaunchMath, GridBlocksIsAtLeastOneAndCapped) {
  EXPECT_EQ(cuda_math::grid_blocks(0, 256), 1);
  EXPECT_EQ(cuda_math::grid_blocks(256, 256), 1);
  EXPECT_EQ(cuda_math::grid_blocks(257, 256), 2);
  EXPECT_EQ(cuda_math::grid_blocks(int64_t{1} << 40, 256), cuda_math::kMaxBlocks);
}

}  // namespace
}  // namespace ddpx
