#include "examples/data/sampler.h"

#include <numeric>

#include "examples/nn/init.h"

namespace ddpx::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank,
                                       int world_size, uint64_t seed, bool shuffle)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle),
      shard_size_((dataset_size + world_size - 1) / world_size) {}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) {
    // Fisher-Yates with our seeded generator: the same on every rank and
    // every platform.
    nn::Rng rng(seed_ * 0x100000001B3ULL + static_cast<uint64_t>(epoch));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
    }
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(shard_size_));
  const int64_t total = shard_size_ * world_size_;
  for (int64_t pos = rank_; pos < total; pos += world_size_) {
    mine.push_back(order[pos % dataset_size_]);
  }
  return mine;
}

}  // namespace ddpx::data
