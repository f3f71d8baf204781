// A caching allocator for device memory: freed blocks go to a free list and
// serve later requests of the same size class, so a training step that frees
// and reallocates its buffers calls the device's malloc only in the first
// step (cudaMalloc synchronizes the device and costs far more than a lookup).
//
// Plain C++: the device's own malloc/free come in through RawDeviceMemory,
// so this bookkeeping is tested on the CPU (tests/cuda/) and used for
// cudaMalloc/cudaFree in cuda/cuda_allocator.cc.
//
// Stream safety follows torch: a block remembers the stream that was current
// when it was allocated, and is only reused for requests on that same stream.
// Work on one stream runs in order, so a block freed on the host while a
// kernel on its stream still reads it is not touched until that kernel is
// done. Users of other streams (the NCCL backend) keep the tensor alive until
// their work completes.
#ifndef DDPX_CUDA_CACHING_ALLOCATOR_H_
#define DDPX_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {

class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  // ResourceExhausted when the device is full; the cache then releases its
  // blocks on that device and tries once more.
  virtual absl::StatusOr<void*> malloc(size_t nbytes, int device) = 0;
  virtual void free(void* ptr, int device) = 0;
};

struct CachingAllocatorStats {
  int64_t requests = 0;       // allocate() calls that succeeded
  int64_t cache_hits = 0;     // served from a free list
  int64_t raw_mallocs = 0;    // calls to RawDeviceMemory::malloc that succeeded
  int64_t raw_frees = 0;
  int64_t bytes_in_use = 0;   // size-class bytes handed out and not yet freed
  int64_t bytes_cached = 0;   // size-class bytes sitting in free lists
};

class CachingAllocator {
 public:
  // Requests up to kSmallLimit round up to a multiple of kSmallQuantum;
  // larger ones to a multiple of kLargeQuantum.
  static constexpr size_t kSmallQuantum = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kLargeQuantum = size_t{2} << 20;
  static size_t size_class(size_t nbytes);

  // `raw` must outlive the allocator.
  explicit CachingAllocator(RawDeviceMemory* raw) : raw_(raw) {}
  // Returns cached blocks to the device; blocks still in use are leaked on
  // purpose (their tensors may outlive a static allocator at exit).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least nbytes (nbytes 0 gives a distinct smallest block).
  absl::StatusOr<void*> allocate(size_t nbytes, int device, uintptr_t stream);
  // Puts the block on its free list. Unknown pointers are an error.
  absl::Status deallocate(void* ptr);
  // Frees every cached block of every device.
  void empty_cache();

  CachingAllocatorStats stats() const;

 private:
  struct Block {
    size_t size;
    int device;
    uintptr_t stream;
  };
  using PoolKey = std::tuple<int, uintptr_t, size_t>;  // device, stream, size

  // Frees cached blocks (of one device, or all when device < 0). mu_ held.
  void release_cached_locked(int device);

  RawDeviceMemory* raw_;
  mutable std::mutex mu_;
  std::map<PoolKey, std::vector<void*>> free_blocks_;
  std::unordered_map<void*, Block> live_blocks_;
  CachingAllocatorStats stats_;
};

}  // namespace ddpx

#endif  // DDPX_CUDA_CACHING_ALLOCATOR_H_
