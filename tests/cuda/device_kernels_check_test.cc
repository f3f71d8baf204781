// The argument checks in front of the device kernels (plain C++, so they run
// here on CPU tensors; the CUDA implementation calls the same functions).
#include "cuda/device_kernels.h"

#include "gtest/gtest.h"

namespace ddpx {
namespace {

bool mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(DeviceKernelsChecks, Cast) {
  Tensor f32 = Tensor::zeros({8}, DType::kFloat32);
  Tensor f16 = Tensor::zeros({8}, DType::kFloat16);
  Tensor bf16 = Tensor::zeros({8}, DType::kBFloat16);
  EXPECT_TRUE(check_cast(f32, f16).ok());
  EXPECT_TRUE(check_cast(bf16, f32).ok());
  absl::Status wrong = check_cast(f16, bf16);
  EXPECT_TRUE(absl::IsInvalidArgument(wrong));
  EXPECT_TRUE(mentions(wrong, "float16")) << wrong;
  absl::Status short_dst = check_cast(f32, Tensor::zeros({7}, DType::kFloat16));
  EXPECT_TRUE(mentions(short_dst, "expected 8 elements")) << short_dst;
  EXPECT_TRUE(mentions(check_cast(Tensor(), f16), "undefined"));
}

TEST(DeviceKernelsChecks, QuantizeSizesFollowTheRecordLayout) {
  Tensor src = Tensor::zeros({10}, DType::kFloat32);
  EXPECT_TRUE(check_quantize(src, 4, Tensor::zeros({34}, DType::kUInt8)).ok());
  absl::Status s = check_quantize(src, 4, Tensor::zeros({18}, DType::kUInt8));
  EXPECT_TRUE(mentions(s, "take 34 bytes")) << s;
  EXPECT_TRUE(mentions(check_quantize(src, 0, Tensor::zeros({34}, DType::kUInt8)),
                       "chunk must be positive"));
  EXPECT_TRUE(check_dequantize(Tensor::zeros({18}, DType::kUInt8), 10, src).ok());
  EXPECT_TRUE(mentions(check_dequantize(Tensor::zeros({18}, DType::kInt8), 10, src), "uint8"));
}

TEST(DeviceKernelsChecks, MatmulShapes) {
  Tensor a = Tensor::zeros({5, 4}, DType::kFloat32);
  Tensor b = Tensor::zeros({4, 3}, DType::kFloat32);
  Tensor c = Tensor::zeros({5, 3}, DType::kFloat32);
  absl::StatusOr<MatmulShape> ok = check_matmul(a, false, b, false, c);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->m, 5);
  EXPECT_EQ(ok->n, 3);
  EXPECT_EQ(ok->k, 4);
  // a^T is 4 x 5: does not fit b.
  absl::StatusOr<MatmulShape> bad = check_matmul(a, true, b, false, c);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(mentions(bad.status(), "op(a) is 4 x 5")) << bad.status();
  Tensor batched_a = Tensor::zeros({2, 5, 4}, DType::kFloat32);
  Tensor batched_b = Tensor::zeros({2, 3, 4}, DType::kFloat32);
  Tensor batched_c = Tensor::zeros({2, 5, 3}, DType::kFloat32);
  absl::StatusOr<MatmulShape> batched = check_matmul(batched_a, false, batched_b, true, batched_c);
  ASSERT_TRUE(batched.ok()) << batched.status();
  EXPECT_EQ(batched->batch, 2);
  EXPECT_FALSE(check_matmul(batched_a, false, b, false, c).ok());
  EXPECT_TRUE(mentions(check_matrices(Tensor::zeros({3}, DType::kFloat32), "P").status(),
                       "expected [rows, cols]"));
}

TEST(DeviceKernelsChecks, ElementwiseNamesTheProblem) {
  Tensor a = Tensor::zeros({8}, DType::kFloat32);
  EXPECT_TRUE(check_elementwise("add_scaled", a, Tensor::zeros({8}, DType::kFloat32), true).ok());
  EXPECT_TRUE(check_elementwise("fill", a, Tensor(), true).ok());
  absl::Status short_b = check_elementwise("add_scaled", a, Tensor::zeros({7}, DType::kFloat32),
                                           true);
  EXPECT_TRUE(mentions(short_b, "expected 8 elements")) << short_b;
  absl::Status f16 = check_elementwise("divide", Tensor::zeros({8}, DType::kFloat16), Tensor(),
                                       true);
  EXPECT_TRUE(absl::IsInvalidArgument(f16));
  EXPECT_TRUE(mentions(f16, "float16")) << f16;
  // copy takes any one dtype, but not two.
  Tensor h = Tensor::zeros({8}, DType::kFloat16);
  EXPECT_TRUE(check_elementwise("copy", h, Tensor::zeros({8}, DType::kFloat16), false).ok());
  absl::Status mixed = check_elementwise("copy", h, a, false);
  EXPECT_TRUE(mentions(mixed, "dtypes differ")) << mixed;
  EXPECT_TRUE(mentions(check_elementwise("fill", Tensor(), Tensor(), true), "undefined"));
}

TEST(DeviceKernelsRegistry, NothingIsRegisteredForCudaInTheCpuBuild) {
  EXPECT_EQ(device_kernels(Device::Type::kCUDA), nullptr);
}

}  // namespace
}  // namespace ddpx
