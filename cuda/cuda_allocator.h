// The DeviceAllocator behind every Tensor on CUDA:i: a CachingAllocator
// (caching_allocator.h) over cudaMalloc/cudaFree. Linking //cuda:allocator
// registers it for Device::Type::kCUDA at static initialization.
#ifndef DDPX_CUDA_CUDA_ALLOCATOR_H_
#define DDPX_CUDA_CUDA_ALLOCATOR_H_

#include "cuda/caching_allocator.h"
#include "core/tensor.h"

namespace ddpx {

class CudaDeviceAllocator : public DeviceAllocator {
 public:
  CudaDeviceAllocator();
  absl::StatusOr<void*> allocate(size_t nbytes, int device_index) override;
  void deallocate(void* ptr, size_t nbytes, int device_index) override;
  // Synchronous copy on the current stream of the CUDA side.
  absl::Status copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t nbytes) override;

  CachingAllocatorStats stats() const { return cache_.stats(); }
  void empty_cache() { cache_.empty_cache(); }

 private:
  class CudaRawMemory : public RawDeviceMemory {
   public:
    absl::StatusOr<void*> malloc(size_t nbytes, int device) override;
    void free(void* ptr, int device) override;
  };
  CudaRawMemory raw_;
  CachingAllocator cache_;
};

// The registered instance (created on first use, never destroyed: tensors
// may be freed during static destruction).
CudaDeviceAllocator& cuda_allocator();

}  // namespace ddpx

#endif  // DDPX_CUDA_CUDA_ALLOCATOR_H_
