#include "core/tensor.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ddpx {
namespace {

TEST(Tensor, ViewsShareStorageAtAnOffset) {
  Tensor flat = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5});
  Tensor v = flat.view(2, {2, 2});
  EXPECT_TRUE(v.shares_storage_with(flat));
  EXPECT_EQ(v.storage_offset(), 2);
  EXPECT_EQ(v.item(0), 2);
  v.fill_(9);
  EXPECT_EQ(flat.to_float_vector(), (std::vector<float>{0, 1, 9, 9, 9, 9}));
  EXPECT_EQ(v.str(), "float32[2, 2] on cpu");
}

TEST(Tensor, CopyFromNamesDtypeAndSizeMismatch) {
  Tensor a = Tensor::zeros({4}, DType::kFloat32);
  absl::Status s = a.copy_from(Tensor::zeros({4}, DType::kFloat16));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expected dtype float32"), std::string::npos) << s;
  EXPECT_NE(s.message().find("float16"), std::string::npos) << s;
  s = a.copy_from(Tensor::zeros({3}, DType::kFloat32));
  EXPECT_NE(s.message().find("expected 4 elements, got 3"), std::string::npos) << s;
  Tensor b = Tensor::from_vector<float>({1, 2, 3, 4});
  ASSERT_TRUE(a.copy_from(b).ok());
  EXPECT_EQ(a.to_float_vector(), b.to_float_vector());
}

TEST(Tensor, CudaAllocationWithoutAllocatorIsAClearError) {
  if (device_allocator(Device::Type::kCUDA) != nullptr) GTEST_SKIP() << "CUDA build";
  absl::StatusOr<Tensor> t = Tensor::empty({2}, DType::kFloat32, Device::cuda(0));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("cuda:0"), std::string::npos);
}

TEST(Half, RoundsToNearestEvenLikeIeee) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // ties to even -> inf
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(5.9604644775390625e-8f), 0x0001);  // min subnormal
  EXPECT_EQ(float_to_half_bits(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half round-trips
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(h)), h) << h;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(bits_float(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bfloat16_bits(bits_float(0x3f818000u)), 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bfloat16_bits(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(NAN))));
}

}  // namespace
}  // namespace ddpx
