#include "cuda/caching_allocator.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

size_t CachingAllocator::size_class(size_t nbytes) {
  if (nbytes == 0) return kSmallQuantum;
  size_t quantum = nbytes <= kSmallLimit ? kSmallQuantum : kLargeQuantum;
  return (nbytes + quantum - 1) / quantum * quantum;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked(-1);
}

absl::StatusOr<void*> CachingAllocator::allocate(size_t nbytes, int device,
                                                 uintptr_t stream) {
  const size_t size = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_blocks_.find(PoolKey{device, stream, size});
  if (it != free_blocks_.end() && !it->second.empty()) {
    void* ptr = it->second.back();
    it->second.pop_back();
    live_blocks_[ptr] = Block{size, device, stream};
    stats_.cache_hits++;
    stats_.requests++;
    stats_.bytes_cached -= size;
    stats_.bytes_in_use += size;
    return ptr;
  }
  absl::StatusOr<void*> ptr = raw_->malloc(size, device);
  if (!ptr.ok() && absl::IsResourceExhausted(ptr.status())) {
    // Blocks of other sizes and streams may be what fills the device.
    release_cached_locked(device);
    ptr = raw_->malloc(size, device);
  }
  if (!ptr.ok()) {
    return absl::Status(
        ptr.status().code(),
        absl::StrCat("allocating ", nbytes, " bytes (size class ", size, ") on device ",
                     device, " with ", stats_.bytes_in_use,
                     " bytes in use by this allocator: ", ptr.status().message()));
  }
  live_blocks_[*ptr] = Block{size, device, stream};
  stats_.raw_mallocs++;
  stats_.requests++;
  stats_.bytes_in_use += size;
  return *ptr;
}

absl::Status CachingAllocator::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deallocate: pointer ", reinterpret_cast<uintptr_t>(ptr),
        " was not allocated by this allocator or was already freed"));
  }
  const Block block = it->second;
  live_blocks_.erase(it);
  free_blocks_[PoolKey{block.device, block.stream, block.size}].push_back(ptr);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_cached += block.size;
  return absl::OkStatus();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked(-1);
}

void CachingAllocator::release_cached_locked(int device) {
  for (auto it = free_blocks_.begin(); it != free_blocks_.end();) {
    const auto& [block_device, stream, size] = it->first;
    if (device >= 0 && block_device != device) {
      ++it;
      continue;
    }
    for (void* ptr : it->second) {
      raw_->free(ptr, block_device);
      stats_.raw_frees++;
      stats_.bytes_cached -= size;
    }
    it = free_blocks_.erase(it);
  }
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ddpx
