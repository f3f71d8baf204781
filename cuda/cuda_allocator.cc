#include "cuda/cuda_allocator.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace ddpx {

absl::StatusOr<void*> CudaDeviceAllocator::CudaRawMemory::malloc(size_t nbytes, int device) {
  DeviceGuard guard(device);
  if (!guard.status().ok()) return guard.status();
  void* ptr = nullptr;
  DDPX_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, nbytes));
  return ptr;
}

void CudaDeviceAllocator::CudaRawMemory::free(void* ptr, int device) {
  DeviceGuard guard(device);
  absl::Status s = DDPX_CUDA_CHECK(cudaFree(ptr));
  // Nowhere to return it to (called from destructors); say so.
  if (!s.ok()) fprintf(stderr, "ddpx cuda allocator: %s\n", s.ToString().c_str());
}

CudaDeviceAllocator::CudaDeviceAllocator() : cache_(&raw_) {}

absl::StatusOr<void*> CudaDeviceAllocator::allocate(size_t nbytes, int device_index) {
  if (device_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA allocation of ", nbytes, " bytes: device index ", device_index,
                     " is not a CUDA ordinal"));
  }
  return cache_.allocate(nbytes, device_index,
                         reinterpret_cast<uintptr_t>(current_stream(device_index)));
}

void CudaDeviceAllocator::deallocate(void* ptr, size_t nbytes, int device_index) {
  absl::Status s = cache_.deallocate(ptr);
  if (!s.ok()) {
    fprintf(stderr, "ddpx cuda allocator: freeing %zu bytes on cuda:%d: %s\n", nbytes,
            device_index, s.ToString().c_str());
  }
}

absl::Status CudaDeviceAllocator::copy(void* dst, Device dst_device, const void* src,
                                       Device src_device, size_t nbytes) {
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  if (!guard.status().ok()) return guard.status();
  cudaStream_t stream = current_stream(device);
  // cudaMemcpyDefault: unified addressing tells host from device memory.
  DDPX_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  DDPX_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

CudaDeviceAllocator& cuda_allocator() {
  static CudaDeviceAllocator* allocator = new CudaDeviceAllocator();
  return *allocator;
}

namespace {
// Tensors on CUDA:i find the allocator through register_device_allocator.
const bool registered = [] {
  register_device_allocator(Device::Type::kCUDA, &cuda_allocator());
  return true;
}();
}  // namespace

}  // namespace ddpx
