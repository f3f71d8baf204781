// HostKernels (hooks/host_kernels.h), DeviceKernels for CPU tensors, against
// plain loops and the CPU kernels; and DeviceKernels' default composites
// (what the CUDA kernels use: cast_scaled, add_then_matmul,
// matmul_then_subtract, orthogonalize_counting, ByteGrad's quantize_divided
// and dequantize_sum, the 16-bit division) against the host's fused ones,
// through a DeviceKernels that only forwards the primitives.
#include "hooks/host_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/kernels/cpu_kernels.h"
#include "hooks/powersgd_random.h"

namespace ddpx {
namespace {

Tensor normal(int64_t n, uint64_t seed, Shape shape = {}) {
  std::vector<float> v(n);
  fill_standard_normal(v.data(), n, seed);
  Tensor t = Tensor::from_vector(v);
  return shape.empty() ? t : t.reshape(shape);
}

void expect_near(const Tensor& got, const Tensor& want, float tolerance) {
  std::vector<float> g = got.to_float_vector(), w = want.to_float_vector();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tolerance) << "element " << i;
}

// The primitives of the host kernels, and DeviceKernels' defaults for the
// composites.
class PrimitivesOnly : public DeviceKernels {
 public:
  absl::Status cast(const Tensor& s, const Tensor& d) override { return h.cast(s, d); }
  absl::Status quantize_minmax(const Tensor& s, int64_t c, const Tensor& d) override {
    return h.quantize_minmax(s, c, d);
  }
  absl::Status dequantize_minmax(const Tensor& s, int64_t c, const Tensor& d, bool a) override {
    return h.dequantize_minmax(s, c, d, a);
  }
  absl::Status orthogonalize(const Tensor& m, float e) override { return h.orthogonalize(m, e); }
  absl::Status matmul(const Tensor& a, bool ta, const Tensor& b, bool tb,
                      const Tensor& c) override {
    return h.matmul(a, ta, b, tb, c);
  }
  absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                          const Tensor& out) override {
    return h.add_scaled(a, alpha, b, out);
  }
  // float32 only, as the CUDA kernel; 16-bit through float32, as CUDA does.
  absl::Status divide(const Tensor& x, float d) override {
    if (x.dtype() == DType::kFloat16 || x.dtype() == DType::kBFloat16) {
      return divide_16bit_in_float32(x, d);
    }
    if (absl::Status s = check_dtype(x, DType::kFloat32, "divide"); !s.ok()) return s;
    return h.divide(x, d);
  }
  absl::Status fill(const Tensor& x, float v) override { return h.fill(x, v); }
  absl::Status zero(const Tensor& x) override { return h.zero(x); }
  absl::Status copy(const Tensor& s, const Tensor& d) override { return h.copy(s, d); }
  absl::Status synchronize(Device d) override { return h.synchronize(d); }

 private:
  HostKernels h;
};

TEST(HostKernels, MatmulInEveryTransposeAgainstALoop) {
  HostKernels k;
  const int64_t batch = 2, m = 37, n = 3, kk = 19;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = normal(batch * m * kk, 1, ta ? Shape{batch, kk, m} : Shape{batch, m, kk});
      Tensor b = normal(batch * kk * n, 2, tb ? Shape{batch, n, kk} : Shape{batch, kk, n});
      Tensor c = Tensor::zeros({batch, m, n}, DType::kFloat32);
      ASSERT_TRUE(k.matmul(a, ta, b, tb, c).ok());
      Tensor want = Tensor::zeros({batch, m, n}, DType::kFloat32);
      const float* pa = a.data_as<float>();
      const float* pb = b.data_as<float>();
      for (int64_t z = 0; z < batch; ++z) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t l = 0; l < kk; ++l) {
              const float x = ta ? pa[z * m * kk + l * m + i] : pa[z * m * kk + i * kk + l];
              const float y = tb ? pb[z * kk * n + j * kk + l] : pb[z * kk * n + l * n + j];
              sum += static_cast<double>(x) * y;
            }
            want.data_as<float>()[z * m * n + i * n + j] = static_cast<float>(sum);
          }
        }
      }
      SCOPED_TRACE(std::string(ta ? "a^T" : "a") + (tb ? " b^T" : " b"));
      expect_near(c, want, 1e-4f);
    }
  }
}

// The fused passes give the composite's values (the defaults CUDA runs).
TEST(HostKernels, FusedCompositesMatchTheDefaults) {
  HostKernels host;
  PrimitivesOnly defaults;
  const int64_t batch = 3, rows = 20, cols = 12;
  for (int64_t rank : {1, 2, 4, 6}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Tensor input = normal(batch * rows * cols, 3, {batch, rows, cols});
    Tensor q = normal(batch * cols * rank, 4, {batch, cols, rank});
    Tensor m1 = normal(batch * rows * cols, 5, {batch, rows, cols}), m2 = m1.clone();
    Tensor p1 = Tensor::zeros({batch, rows, rank}, DType::kFloat32), p2 = p1.clone();
    ASSERT_TRUE(host.add_then_matmul(m1, input, q, p1).ok());
    ASSERT_TRUE(defaults.add_then_matmul(m2, input, q, p2).ok());
    EXPECT_EQ(m1.to_float_vector(), m2.to_float_vector()) << "m += input, exactly";
    expect_near(p1, p2, 1e-4f);

    Tensor out1 = Tensor::zeros({batch, rows, cols}, DType::kFloat32), out2 = out1.clone();
    Tensor e1 = m1.clone(), e2 = m1.clone();
    ASSERT_TRUE(host.matmul_then_subtract(p1, q, out1, e1).ok());
    ASSERT_TRUE(defaults.matmul_then_subtract(p1, q, out2, e2).ok());
    expect_near(out1, out2, 1e-5f);
    expect_near(e1, e2, 1e-5f);
    ASSERT_TRUE(host.matmul_then_subtract(p1, q, out1, Tensor()).ok());
    expect_near(out1, out2, 1e-5f);
  }
}

TEST(HostKernels, CastScaledDividesInFloat32ThenRoundsOnce) {
  HostKernels host;
  PrimitivesOnly defaults;
  Tensor src = normal(1003, 6);
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    Tensor a = Tensor::zeros({1003}, d), b = Tensor::zeros({1003}, d);
    ASSERT_TRUE(host.cast_scaled(src, 3.0f, a).ok());
    ASSERT_TRUE(defaults.cast_scaled(src, 3.0f, b).ok());
    EXPECT_EQ(a.to_float_vector(), b.to_float_vector()) << dtype_name(d);
    Tensor back = Tensor::zeros({1003}, DType::kFloat32);
    ASSERT_TRUE(host.cast(a, back).ok());
    for (int64_t i = 0; i < 1003; ++i) {
      ASSERT_NEAR(back.item(i), src.item(i) / 3.0, d == DType::kFloat16 ? 2e-3 : 2e-2);
    }
  }
}

// Records of `chunk` values back to back, each the CPU kernels' record.
TEST(HostKernels, Int8RecordsAreTheCpuKernelsRecords) {
  HostKernels k;
  const int64_t n = 1000, chunk = 300;  // 4 records, the last of 100
  Tensor src = normal(n, 7);
  const int64_t bytes = n + 8 * 4;
  Tensor records = Tensor::zeros({bytes}, DType::kUInt8);
  ASSERT_TRUE(k.quantize_minmax(src, chunk, records).ok());
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t len = std::min(chunk, n - r * chunk);
    std::vector<uint8_t> want(kernels::quantized_record_bytes(len));
    kernels::quantize(src.data_as<float>() + r * chunk, len, want.data());
    EXPECT_EQ(0, memcmp(static_cast<uint8_t*>(records.data()) + r * (chunk + 8), want.data(),
                        want.size()))
        << "record " << r;
  }
  Tensor decoded = Tensor::zeros({n}, DType::kFloat32);
  ASSERT_TRUE(k.dequantize_minmax(records, chunk, decoded, false).ok());
  expect_near(decoded, src, 0.05f);
  ASSERT_TRUE(k.dequantize_minmax(records, chunk, decoded, true).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(decoded.item(i), 2 * src.item(i), 0.1);
}

std::vector<uint8_t> byte_vector(const Tensor& t) {
  const uint8_t* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

// ByteGrad's fused steps: the host's single passes (cpu_kernels.h's
// quantize_divided and dequantize_sum) write the bytes and bits of the
// defaults a device runs (divide then quantize; zero then decode-and-add),
// and of the CPU kernels called directly; a slot's padding is zeroed.
TEST(HostKernels, ByteGradStepsMatchTheDefaultsByteForByte) {
  HostKernels host;
  PrimitivesOnly defaults;
  for (int64_t n : {0, 1, 7, 300, 1001}) {
    for (float divisor : {1.0f, 3.0f, 4.0f}) {
      SCOPED_TRACE("n " + std::to_string(n) + " divisor " + std::to_string(divisor));
      Tensor src = normal(std::max<int64_t>(n, 1), 11 + n).view(0, {n});
      const int64_t slot = static_cast<int64_t>(kernels::quantized_record_bytes(n)) + 5;
      Tensor a = Tensor::zeros({slot}, DType::kUInt8), b = Tensor::zeros({slot}, DType::kUInt8);
      memset(a.data(), 0xAB, slot);  // stale memory: the padding must be zeroed
      memset(b.data(), 0xCD, slot);
      ASSERT_TRUE(host.quantize_divided(src, divisor, a).ok());
      ASSERT_TRUE(defaults.quantize_divided(src, divisor, b).ok());
      EXPECT_EQ(byte_vector(a), byte_vector(b));
      std::vector<uint8_t> want(slot, 0);
      kernels::quantize_divided(src.data_as<float>(), n, divisor, want.data());
      EXPECT_EQ(byte_vector(a), want);
    }
  }
  // Three records of 300 values, 310 bytes apart (a slot each).
  const int64_t n = 300, stride = 310, count = 3;
  Tensor records = Tensor::zeros({stride * count}, DType::kUInt8);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_TRUE(host.quantize_divided(normal(n, 20 + i), 1.0f,
                                      records.view(i * stride, {stride}))
                    .ok());
  }
  Tensor sum1 = normal(n, 30), sum2 = normal(n, 31);  // overwritten, not added to
  ASSERT_TRUE(host.dequantize_sum(records, count, stride, sum1).ok());
  ASSERT_TRUE(defaults.dequantize_sum(records, count, stride, sum2).ok());
  EXPECT_EQ(sum1.to_float_vector(), sum2.to_float_vector());
  Tensor want = Tensor::zeros({n}, DType::kFloat32);
  for (int64_t i = 0; i < count; ++i) {
    kernels::dequantize_add(static_cast<uint8_t*>(records.data()) + i * stride, n,
                            want.data_as<float>());
  }
  EXPECT_EQ(sum1.to_float_vector(), want.to_float_vector());

  absl::Status s = host.dequantize_sum(records, 4, stride, sum1);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("do not fit in 930 bytes"), std::string::npos) << s;
  s = host.quantize_divided(normal(n, 1), 2.0f, Tensor::zeros({n}, DType::kUInt8));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("a record of 300 values takes 308 bytes"), std::string::npos) << s;
}

// A 16-bit division: widened, divided in float32, rounded once, whether the
// host does it in one loop or a device through its float32 operations.
TEST(HostKernels, SixteenBitDivisionMatchesTheFloat32Route) {
  HostKernels host;
  PrimitivesOnly defaults;
  Tensor src = normal(1003, 9);
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    Tensor a = Tensor::zeros({1003}, d);
    ASSERT_TRUE(host.cast(src, a).ok());
    Tensor b = a.clone();
    ASSERT_TRUE(host.divide(a, 3.0f).ok());
    ASSERT_TRUE(defaults.divide(b, 3.0f).ok());
    EXPECT_EQ(0, memcmp(a.data(), b.data(), a.nbytes())) << dtype_name(d);
  }
  Tensor ints = Tensor::zeros({4}, DType::kInt32);
  absl::Status s = host.divide(ints, 2.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("floating dtypes only"), std::string::npos) << s;
}

TEST(HostKernels, OrthogonalizeCountsZeroColumnsWhereTheDefaultCannot) {
  HostKernels host;
  PrimitivesOnly defaults;
  Tensor m = normal(2 * 8 * 3, 8, {2, 8, 3});
  for (int64_t i = 0; i < 8; ++i) m.data_as<float>()[i * 3 + 1] = 0.0f;  // batch 0, column 1
  Tensor same = m.clone();
  absl::StatusOr<int> zeros = host.orthogonalize_counting(m, 0.0f);
  ASSERT_TRUE(zeros.ok());
  EXPECT_EQ(*zeros, 1);
  absl::StatusOr<int> unknown = defaults.orthogonalize_counting(same, 0.0f);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(*unknown, -1);
  EXPECT_EQ(m.to_float_vector(), same.to_float_vector());
}

TEST(HostKernels, ElementwiseAndChecks) {
  HostKernels k;
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  Tensor b = Tensor::from_vector(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f});
  Tensor out = Tensor::zeros({4}, DType::kFloat32);
  ASSERT_TRUE(k.add_scaled(a, 2.0f, b, out).ok());
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{2, 3, 4, 5}));
  ASSERT_TRUE(k.add_scaled(a, -1.0f, b, a).ok());  // in place
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  ASSERT_TRUE(k.add_scaled(a, 1.0f, a, a).ok());  // a += a, aliased
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{1, 3, 5, 7}));
  ASSERT_TRUE(k.divide(a, 2.0f).ok());
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  ASSERT_TRUE(k.fill(a, 9.0f).ok());
  ASSERT_TRUE(k.copy(a, out).ok());
  EXPECT_EQ(out.to_float_vector(), (std::vector<float>{9, 9, 9, 9}));
  EXPECT_TRUE(k.synchronize(Device::cpu()).ok());

  float elsewhere[4];
  Tensor on_gpu = Tensor::from_blob(elsewhere, {4}, DType::kFloat32, Device::cuda(0));
  absl::Status s = k.fill(on_gpu, 0.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("host kernels got"), std::string::npos) << s;
  EXPECT_FALSE(k.add_scaled(a, 1.0f, Tensor::zeros({3}, DType::kFloat32), a).ok());
  EXPECT_FALSE(k.matmul(a.reshape({2, 2}), false, a.reshape({4, 1}), false,
                        Tensor::zeros({2, 1}, DType::kFloat32))
                   .ok());
}

TEST(HostKernels, OneInstanceServesTheProcess) {
  EXPECT_EQ(&host_kernels(), &host_kernels());
}

}  // namespace
}  // namespace ddpx
