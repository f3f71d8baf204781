// The caching allocator behind CUDA tensors, on a real device.
#include "cuda/cuda_allocator.h"
#include "core/tensor.h"
#include "tests/cuda/gpu_skip.h"

namespace ddpx {
namespace {

TEST(GpuAllocator, IsRegisteredForCudaTensors) {
  EXPECT_EQ(device_allocator(Device::Type::kCUDA), &cuda_allocator());
}

TEST(GpuAllocator, TensorsRoundTripThroughDeviceMemory) {
  DDPX_SKIP_WITHOUT_GPU();
  Tensor host = Tensor::from_vector<float>({1.5f, -2.0f, 3.25f, 4.0f});
  absl::StatusOr<Tensor> dev = Tensor::empty({4}, DType::kFloat32, Device::cuda(0));
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_TRUE(dev->copy_from(host).ok());
  Tensor back = Tensor::zeros({4}, DType::kFloat32);
  ASSERT_TRUE(back.copy_from(*dev).ok());
  EXPECT_EQ(back.to_float_vector(), host.to_float_vector());
}

TEST(GpuAllocator, StepsAfterTheFirstDoNotCallCudaMalloc) {
  DDPX_SKIP_WITHOUT_GPU();
  cuda_allocator().empty_cache();
  const int64_t before = cuda_allocator().stats().raw_mallocs;
  for (int step = 0; step < 5; ++step) {
    absl::StatusOr<Tensor> a = Tensor::empty({1 << 20}, DType::kFloat32, Device::cuda(0));
    absl::StatusOr<Tensor> b = Tensor::empty({1000}, DType::kFloat16, Device::cuda(0));
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(cuda_allocator().stats().raw_mallocs - before, 2);
}

TEST(GpuAllocator, BadDeviceIndexIsAnError) {
  DDPX_SKIP_WITHOUT_GPU();
  absl::StatusOr<Tensor> t = Tensor::empty({4}, DType::kFloat32, Device::cuda(cuda_device_count()));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("CUDA call"), std::string::npos) << t.status();
}

}  // namespace
}  // namespace ddpx
