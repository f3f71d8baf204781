// The int8 quantization kernels' steps, replayed on the CPU exactly as the
// grid runs them (pass 1: one block per record, per-thread min/max folded in
// tree order; pass 2: grid-stride codes), must produce the bytes the CPU
// hook kernels produce, and decode to what they decode.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/block_reduce.h"
#include "cuda/launch_math.h"
#include "cuda/quantize_math.h"
#include "gtest/gtest.h"
#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace {

using cuda_math::MinMaxPair;

static_assert(cuda_math::kQuantizeEpsilon == kernels::kQuantizeEpsilon,
              "the CUDA and CPU quantizers must use one epsilon");
static_assert(cuda_math::kQuantizedHeaderBytes ==
                  static_cast<int64_t>(kernels::kQuantizedHeaderBytes),
              "one header size");

constexpr int kThreads = cuda_math::kThreadsPerBlock;

// quantize.cu's two passes on the CPU.
std::vector<uint8_t> replay_quantize(const std::vector<float>& in, int64_t chunk) {
  const int64_t n = in.size();
  std::vector<uint8_t> out(cuda_math::quantized_bytes(n, chunk));
  const int64_t records = cuda_math::quantized_records(n, chunk);
  for (int64_t r = 0; r < records; ++r) {
    const int64_t elems = cuda_math::record_elems(r, n, chunk);
    std::vector<MinMaxPair> partial(kThreads);
    for (int t = 0; t < kThreads; ++t)
      partial[t] = cuda_math::minmax_thread(in.data() + r * chunk, elems, t, kThreads);
    cuda_math::reduce_in_tree_order(partial.data(), kThreads,
                                    [](MinMaxPair a, MinMaxPair b) {
                                      return cuda_math::minmax_combine(a, b);
                                    });
    cuda_math::write_header(out.data() + cuda_math::record_offset(r, chunk),
                            cuda_math::minmax_finish(partial[0], elems));
  }
  const int blocks = cuda_math::grid_blocks(n, kThreads);
  const int64_t nthreads = static_cast<int64_t>(blocks) * kThreads;
  for (int64_t t = 0; t < nthreads; ++t)
    cuda_math::quantize_codes_thread(in.data(), n, chunk, out.data(), t, nthreads);
  return out;
}

std::vector<float> replay_dequantize(const std::vector<uint8_t>& q, int64_t n, int64_t chunk,
                                     std::vector<float> out, bool accumulate) {
  const int64_t nthreads = 3 * kThreads;
  for (int64_t t = 0; t < nthreads; ++t)
    cuda_math::dequantize_thread(q.data(), n, chunk, out.data(), accumulate, t, nthreads);
  return out;
}

// The CPU kernels' bytes for the same chunking: one record per chunk.
std::vector<uint8_t> cpu_quantize(const std::vector<float>& in, int64_t chunk) {
  const int64_t n = in.size();
  std::vector<uint8_t> out(cuda_math::quantized_bytes(n, chunk));
  for (int64_t r = 0; r < cuda_math::quantized_records(n, chunk); ++r) {
    kernels::quantize(in.data() + r * chunk, cuda_math::record_elems(r, n, chunk),
                      out.data() + cuda_math::record_offset(r, chunk), kernels::Isa::kScalar);
  }
  return out;
}

std::vector<float> gradients(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      ASSERT_TRUE(std::isnan(a[i])) << i;
    } else {
      ASSERT_EQ(float_bits(a[i]), float_bits(b[i]))
          << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
}

TEST(QuantizeMath, BytesMatchTheCpuKernelsForOneRecordAndForChunks) {
  for (int64_t n : {1, 7, 255, 256, 257, 10000}) {
    std::vector<float> in = gradients(n, static_cast<uint32_t>(n));
    for (int64_t chunk : {n, int64_t{64}, int64_t{1000}}) {
      EXPECT_EQ(replay_quantize(in, chunk), cpu_quantize(in, chunk))
          << "n=" << n << " chunk=" << chunk;
    }
  }
}

TEST(QuantizeMath, DecodingMatchesTheCpuKernelsAndStaysWithinHalfAStep) {
  const int64_t n = 3000, chunk = 512;
  std::vector<float> in = gradients(n, 11);
  std::vector<uint8_t> q = replay_quantize(in, chunk);
  std::vector<float> gpu = replay_dequantize(q, n, chunk, std::vector<float>(n), false);
  std::vector<float> cpu(n);
  for (int64_t r = 0; r < cuda_math::quantized_records(n, chunk); ++r) {
    const uint8_t* rec = q.data() + cuda_math::record_offset(r, chunk);
    kernels::dequantize(rec, cuda_math::record_elems(r, n, chunk), cpu.data() + r * chunk,
                        kernels::Isa::kScalar);
    const float step = kernels::quantization_step(rec);
    for (int64_t i = r * chunk; i < r * chunk + cuda_math::record_elems(r, n, chunk); ++i)
      ASSERT_LE(std::fabs(gpu[i] - in[i]), step / 2 * 1.001f) << i;
  }
  expect_same_floats(gpu, cpu);
}

TEST(QuantizeMath, AccumulateAddsLikeDequantizeAdd) {
  const int64_t n = 777;
  std::vector<float> in = gradients(n, 5);
  std::vector<uint8_t> q = replay_quantize(in, n);
  std::vector<float> acc = gradients(n, 6);
  std::vector<float> cpu = acc;
  kernels::dequantize_add(q.data(), n, cpu.data(), kernels::Isa::kScalar);
  expect_same_floats(replay_dequantize(q, n, n, acc, true), cpu);
}

TEST(QuantizeMath, SpecialValuesGiveTheCpuBytes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> cases = {
      {-0.0f, 0.0f, -0.0f},            // signed zeros: header +0
      {5.0f, 5.0f, 5.0f},              // constant chunk: range is eps
      {1.0f, nan, -1.0f},              // NaN: both bounds NaN
      {1.0f, inf, 2.0f},               // inf: decodes to NaN
      {-3.0f, 1e30f, -1e30f, 0.5f},    // huge range
  };
  for (const auto& in : cases) {
    const int64_t n = in.size();
    std::vector<uint8_t> gpu = replay_quantize(in, n);
    std::vector<uint8_t> cpu = cpu_quantize(in, n);
    EXPECT_EQ(gpu, cpu) << "case starting " << in[0];
    std::vector<float> cpu_out(n);
    kernels::dequantize(cpu.data(), n, cpu_out.data(), kernels::Isa::kScalar);
    expect_same_floats(replay_dequantize(gpu, n, n, std::vector<float>(n), false), cpu_out);
  }
}

TEST(QuantizeMath, LayoutArithmetic) {
  EXPECT_EQ(cuda_math::quantized_records(10, 4), 3);
  EXPECT_EQ(cuda_math::quantized_bytes(10, 4), 10 + 3 * 8);
  EXPECT_EQ(cuda_math::record_offset(2, 4), 24);
  EXPECT_EQ(cuda_math::record_elems(2, 10, 4), 2);
  EXPECT_EQ(cuda_math::quantized_bytes(10, 10),
            static_cast<int64_t>(kernels::quantized_record_bytes(10)));
}

}  // namespace
}  // namespace ddpx
