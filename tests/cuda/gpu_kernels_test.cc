// The hooks' kernels on CUDA tensors against the CPU hook kernels: casts,
// int8 quantization, ByteGrad's quantize_divided and dequantize_sum and the
// divisions must give the same bytes, Gram-Schmidt and the cuBLAS GEMMs the
// same numbers to float rounding.
#include <cmath>
#include <random>
#include <vector>

#include "cuda/device_kernels.h"
#include "hooks/host_kernels.h"
#include "hooks/kernels/cpu_kernels.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_orthogonalize.h"
#include "core/tensor.h"
#include "tests/cuda/gpu_skip.h"

namespace ddpx {
namespace {

Tensor on_gpu(const Tensor& host) {
  absl::StatusOr<Tensor> t = Tensor::empty(host.shape(), host.dtype(), Device::cuda(0));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->copy_from(host).ok());
  return *t;
}

Tensor on_cpu(const Tensor& dev) {
  Tensor host = Tensor::zeros(dev.shape(), dev.dtype());
  absl::Status s = host.copy_from(dev);
  EXPECT_TRUE(s.ok()) << s;
  return host;
}

Tensor random_floats(Shape shape, uint32_t seed) {
  Tensor t = Tensor::zeros(shape, DType::kFloat32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = normal(rng);
  return t;
}

DeviceKernels& gpu() {
  DeviceKernels* k = device_kernels(Device::Type::kCUDA);
  EXPECT_NE(k, nullptr) << "//cuda:device_kernels_cuda not linked";
  return *k;
}

TEST(GpuKernels, AreRegisteredForCuda) { EXPECT_NE(device_kernels(Device::Type::kCUDA), nullptr); }

TEST(GpuKernels, CastsGiveTheCpuBits) {
  DDPX_SKIP_WITHOUT_GPU();
  const int64_t n = 100003;  // odd: vector part plus a tail
  Tensor x = random_floats({n}, 1);
  std::vector<uint16_t> cpu_half(n), cpu_bf16(n);
  kernels::float_to_half(x.data_as<float>(), cpu_half.data(), n);
  kernels::float_to_bfloat16(x.data_as<float>(), cpu_bf16.data(), n);
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    Tensor dev_x = on_gpu(x);
    Tensor dev_h = *Tensor::empty({n}, dt, Device::cuda(0));
    ASSERT_TRUE(gpu().cast(dev_x, dev_h).ok());
    Tensor back = *Tensor::empty({n}, DType::kFloat32, Device::cuda(0));
    ASSERT_TRUE(gpu().cast(dev_h, back).ok());
    ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
    Tensor h = on_cpu(dev_h);
    const std::vector<uint16_t>& want = dt == DType::kFloat16 ? cpu_half : cpu_bf16;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<const uint16_t*>(h.data())[i], want[i]) << dtype_name(dt) << " " << i;
    Tensor f = on_cpu(back);
    for (int64_t i = 0; i < n; ++i) {
      float expect = dt == DType::kFloat16 ? half_bits_to_float(want[i])
                                           : bfloat16_bits_to_float(want[i]);
      ASSERT_EQ(f.data_as<float>()[i], expect) << i;
    }
  }
}

TEST(GpuKernels, QuantizeGivesTheCpuBytesAndDecodesLikeTheCpu) {
  DDPX_SKIP_WITHOUT_GPU();
  const int64_t n = 50000, chunk = 4096;
  Tensor x = random_floats({n}, 2);
  const int64_t records = (n + chunk - 1) / chunk;
  const int64_t bytes = n + 8 * records;
  std::vector<uint8_t> cpu(bytes);
  for (int64_t r = 0; r < records; ++r) {
    kernels::quantize(x.data_as<float>() + r * chunk, std::min(chunk, n - r * chunk),
                      cpu.data() + r * (chunk + 8));
  }
  Tensor dev_q = *Tensor::empty({bytes}, DType::kUInt8, Device::cuda(0));
  ASSERT_TRUE(gpu().quantize_minmax(on_gpu(x), chunk, dev_q).ok());
  Tensor dev_out = *Tensor::empty({n}, DType::kFloat32, Device::cuda(0));
  ASSERT_TRUE(gpu().dequantize_minmax(dev_q, chunk, dev_out, false).ok());
  ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
  Tensor q = on_cpu(dev_q);
  for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(q.data_as<uint8_t>()[i], cpu[i]) << "byte " << i;
  std::vector<float> cpu_out(n);
  for (int64_t r = 0; r < records; ++r) {
    kernels::dequantize(cpu.data() + r * (chunk + 8), std::min(chunk, n - r * chunk),
                        cpu_out.data() + r * chunk);
  }
  Tensor out = on_cpu(dev_out);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.data_as<float>()[i], cpu_out[i]) << i;
}

std::vector<uint8_t> bytes_of(const Tensor& host) {
  const uint8_t* p = static_cast<const uint8_t*>(host.data());
  return std::vector<uint8_t>(p, p + host.nbytes());
}

// What ByteGrad runs on a device bucket of several ranks: each chunk's
// record of x / p into a longer slot (padding zeroed), the records summed,
// the sum quantized as its average; and the hooks' divisions (float32 and
// 16-bit). The same bytes as the host kernels, which are the CPU hook's.
TEST(GpuKernels, ByteGradStepsAndDivisionsGiveTheHostBytes) {
  DDPX_SKIP_WITHOUT_GPU();
  DeviceKernels& host = host_kernels();
  const int64_t n = 10007, slot = n + 8 + 13;
  for (float divisor : {1.0f, 3.0f}) {
    Tensor x = random_floats({n}, 5);
    Tensor want = Tensor::zeros({slot}, DType::kUInt8);
    ASSERT_TRUE(host.quantize_divided(x, divisor, want).ok());
    // Stale bytes in the slot: its padding must come out zero.
    Tensor dev_slot = on_gpu(Tensor::from_vector(std::vector<uint8_t>(slot, 0xAB)));
    ASSERT_TRUE(gpu().quantize_divided(on_gpu(x), divisor, dev_slot).ok());
    ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
    EXPECT_EQ(bytes_of(on_cpu(dev_slot)), bytes_of(want)) << "divisor " << divisor;
  }
  Tensor empty_slot = on_gpu(Tensor::from_vector(std::vector<uint8_t>(12, 0xAB)));
  ASSERT_TRUE(gpu().quantize_divided(on_gpu(Tensor::zeros({0}, DType::kFloat32)), 2.0f,
                                     empty_slot)
                  .ok());
  ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
  EXPECT_EQ(bytes_of(on_cpu(empty_slot)), std::vector<uint8_t>(12, 0)) << "an empty chunk";

  const int count = 3;
  Tensor records = Tensor::zeros({count * slot}, DType::kUInt8);
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(host.quantize_divided(random_floats({n}, 10 + i), 1.0f,
                                      records.view(i * slot, {slot}))
                    .ok());
  }
  Tensor sum = Tensor::zeros({n}, DType::kFloat32);
  ASSERT_TRUE(host.dequantize_sum(records, count, slot, sum).ok());
  Tensor dev_sum = on_gpu(random_floats({n}, 99));  // overwritten, not added to
  ASSERT_TRUE(gpu().dequantize_sum(on_gpu(records), count, slot, dev_sum).ok());
  ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
  EXPECT_EQ(bytes_of(on_cpu(dev_sum)), bytes_of(sum));

  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Tensor x = Tensor::zeros({n}, dt);
    if (dt == DType::kFloat32) {
      x = random_floats({n}, 7);
    } else {
      ASSERT_TRUE(host.cast(random_floats({n}, 7), x).ok());
    }
    Tensor dev_x = on_gpu(x);
    ASSERT_TRUE(host.divide(x, 3.0f).ok());
    ASSERT_TRUE(gpu().divide(dev_x, 3.0f).ok());
    ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
    EXPECT_EQ(bytes_of(on_cpu(dev_x)), bytes_of(x)) << dtype_name(dt);
  }
}

TEST(GpuKernels, OrthogonalizeMatchesTheCpuHook) {
  DDPX_SKIP_WITHOUT_GPU();
  const int64_t batch = 3, rows = 2000, cols = 4;
  Tensor m = random_floats({batch, rows, cols}, 3);
  Tensor dev = on_gpu(m);
  ASSERT_TRUE(gpu().orthogonalize(dev, 0.0f).ok());
  ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
  Tensor got = on_cpu(dev);
  for (int64_t b = 0; b < batch; ++b)
    orthogonalize_columns(m.data_as<float>() + b * rows * cols, rows, cols, 0.0f);
  for (int64_t i = 0; i < m.numel(); ++i)
    ASSERT_NEAR(got.data_as<float>()[i], m.data_as<float>()[i], 1e-5f) << i;
}

TEST(GpuKernels, BatchedMatmulMatchesTheCpuHook) {
  DDPX_SKIP_WITHOUT_GPU();
  const int64_t batch = 4, rows = 64, cols = 48, rank = 2;
  Tensor m = random_floats({batch, rows, cols}, 4);
  Tensor q = random_floats({batch, cols, rank}, 5);
  Tensor dev_p = *Tensor::empty({batch, rows, rank}, DType::kFloat32, Device::cuda(0));
  ASSERT_TRUE(gpu().matmul(on_gpu(m), false, on_gpu(q), false, dev_p).ok());
  ASSERT_TRUE(gpu().synchronize(Device::cuda(0)).ok());
  Tensor p = on_cpu(dev_p);
  std::vector<float> want(rows * rank);
  for (int64_t b = 0; b < batch; ++b) {
    matmul_m_q(m.data_as<float>() + b * rows * cols, rows, cols,
               q.data_as<float>() + b * cols * rank, rank, want.data());
    for (int64_t i = 0; i < rows * rank; ++i)
      ASSERT_NEAR(p.data_as<float>()[b * rows * rank + i], want[i], 1e-4f) << b << " " << i;
  }
}

}  // namespace
}  // namespace ddpx
