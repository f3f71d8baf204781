// CachingAllocator's bookkeeping over host memory standing in for a device:
// a budgeted malloc that counts calls, so "no raw malloc per step", the
// per-stream pools and the release-and-retry on exhaustion are observable.
#include "cuda/caching_allocator.h"

#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddpx {
namespace {

class BudgetedHostMemory : public RawDeviceMemory {
 public:
  explicit BudgetedHostMemory(size_t budget) : budget_(budget) {}
  ~BudgetedHostMemory() override { EXPECT_EQ(in_use_, 0u) << "blocks leaked to the device"; }
  absl::StatusOr<void*> malloc(size_t nbytes, int device) override {
    if (in_use_ + nbytes > budget_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("device ", device, " out of memory for ", nbytes, " bytes"));
    }
    in_use_ += nbytes;
    mallocs_++;
    void* p = std::malloc(nbytes);
    sizes_[p] = nbytes;
    return p;
  }
  void free(void* ptr, int) override {
    in_use_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    std::free(ptr);
  }
  int mallocs() const { return mallocs_; }
  size_t in_use() const { return in_use_; }

 private:
  size_t budget_;
  size_t in_use_ = 0;
  int mallocs_ = 0;
  std::map<void*, size_t> sizes_;
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::size_class((5 << 20) + 3), size_t{6} << 20);
}

TEST(CachingAllocator, TrainingStepsReuseBlocksWithoutRawMallocs) {
  BudgetedHostMemory raw(1 << 30);
  {
    CachingAllocator cache(&raw);
    const std::vector<size_t> step_sizes = {4000, 100, 3 << 20, 4000, 777};
    for (int step = 0; step < 10; ++step) {
      std::vector<void*> blocks;
      for (size_t s : step_sizes) {
        absl::StatusOr<void*> p = cache.allocate(s, 0, /*stream=*/0);
        ASSERT_TRUE(p.ok()) << p.status();
        blocks.push_back(*p);
      }
      EXPECT_EQ(std::set<void*>(blocks.begin(), blocks.end()).size(), blocks.size())
          << "a live block was handed out twice";
      for (void* p : blocks) ASSERT_TRUE(cache.deallocate(p).ok());
    }
    EXPECT_EQ(raw.mallocs(), 5) << "only the first step may call the device malloc";
    CachingAllocatorStats stats = cache.stats();
    EXPECT_EQ(stats.requests, 50);
    EXPECT_EQ(stats.cache_hits, 45);
    EXPECT_EQ(stats.bytes_in_use, 0);
    EXPECT_GT(stats.bytes_cached, 3 << 20);
  }
  EXPECT_EQ(raw.in_use(), 0u) << "the destructor returns cached blocks";
}

TEST(CachingAllocator, BlocksAreNotSharedAcrossStreamsOrDevices) {
  BudgetedHostMemory raw(1 << 30);
  CachingAllocator cache(&raw);
  void* a = *cache.allocate(1000, 0, 1);
  ASSERT_TRUE(cache.deallocate(a).ok());
  void* other_stream = *cache.allocate(1000, 0, 2);
  void* other_device = *cache.allocate(1000, 1, 1);
  EXPECT_NE(other_stream, a);
  EXPECT_NE(other_device, a);
  void* again = *cache.allocate(1000, 0, 1);
  EXPECT_EQ(again, a) << "same device and stream reuses the block";
  EXPECT_EQ(raw.mallocs(), 3);
  for (void* p : {other_stream, other_device, again}) ASSERT_TRUE(cache.deallocate(p).ok());
}

TEST(CachingAllocator, ExhaustionReleasesTheCacheAndRetries) {
  BudgetedHostMemory raw(8 << 20);
  CachingAllocator cache(&raw);
  void* big = *cache.allocate(6 << 20, 0, 0);
  ASSERT_TRUE(cache.deallocate(big).ok());  // cached, still counted by the device
  absl::StatusOr<void*> other = cache.allocate(4 << 20, 0, 0);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(cache.stats().bytes_cached, 0);
  EXPECT_EQ(cache.stats().raw_frees, 1);
  ASSERT_TRUE(cache.deallocate(*other).ok());
}

TEST(CachingAllocator, ExhaustionThatPersistsSaysHowMuchWasAsked) {
  BudgetedHostMemory raw(1 << 20);
  CachingAllocator cache(&raw);
  absl::StatusOr<void*> p = cache.allocate(5 << 20, 3, 0);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(p.status()));
  EXPECT_NE(p.status().message().find("allocating 5242880 bytes"), std::string::npos)
      << p.status();
  EXPECT_NE(p.status().message().find("device 3"), std::string::npos) << p.status();
}

TEST(CachingAllocator, FreeingAnUnknownOrFreedPointerIsAnError) {
  BudgetedHostMemory raw(1 << 20);
  CachingAllocator cache(&raw);
  int local;
  EXPECT_TRUE(absl::IsInvalidArgument(cache.deallocate(&local)));
  void* p = *cache.allocate(10, 0, 0);
  ASSERT_TRUE(cache.deallocate(p).ok());
  absl::Status twice = cache.deallocate(p);
  EXPECT_TRUE(absl::IsInvalidArgument(twice));
  EXPECT_NE(twice.message().find("already freed"), std::string::npos);
}

TEST(CachingAllocator, ThreadsAllocatingAtOnceNeverShareABlock) {
  BudgetedHostMemory raw(size_t{1} << 30);
  CachingAllocator cache(&raw);
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> seen(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        void* p = *cache.allocate(4096, 0, 0);
        static_cast<char*>(p)[0] = static_cast<char>(t);
        seen[t].push_back(p);
        if (i % 2 == 1) {
          ASSERT_TRUE(cache.deallocate(seen[t][i - 1]).ok());
          ASSERT_TRUE(cache.deallocate(p).ok());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.stats().bytes_in_use, 0);
  EXPECT_LE(raw.mallocs(), 8);
}

}  // namespace
}  // namespace ddpx
