// Which samples each rank sees in an epoch: torch.utils.data.
// DistributedSampler's semantics (shuffle=True, drop_last=False). Each epoch
// a permutation seeded by (seed, epoch), identical on every rank, is padded
// by wrapping around to a multiple of world_size; rank r takes positions
// r, r + world_size, ... So shards are equal, disjoint up to the padding,
// and together cover the dataset.
#ifndef DDPX_EXAMPLES_DATA_SAMPLER_H_
#define DDPX_EXAMPLES_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace ddpx::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size,
                     uint64_t seed, bool shuffle = true);
  // Samples per rank per epoch: ceil(dataset_size / world_size).
  int64_t shard_size() const { return shard_size_; }
  // This rank's sample indices for `epoch`, in visiting order.
  std::vector<int64_t> indices(int64_t epoch) const;

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  uint64_t seed_;
  bool shuffle_;
  int64_t shard_size_;
};

}  // namespace ddpx::data

#endif  // DDPX_EXAMPLES_DATA_SAMPLER_H_
