// Which samples each rank trains on when the number of ranks can change in
// the middle of an epoch (docs/elastic.md, "Data").
//
// An epoch is one permutation of the dataset, seeded by (seed, epoch) and
// the same on every rank, and a cursor: how many of its samples committed
// steps have consumed. A step takes the next world x batch samples (fewer at
// the end of the epoch) and splits them evenly over the live ranks in rank
// order. The cursor moves only when a step commits, on every rank alike, so
// after a membership change the new ranks continue from it: every sample of
// the epoch is trained on exactly once, whatever the world size was when.
// A tail with fewer samples than ranks is dropped (as drop_last would).
#ifndef DDPX_ELASTIC_EPOCH_PLAN_H_
#define DDPX_ELASTIC_EPOCH_PLAN_H_

#include <cstdint>
#include <vector>

namespace ddpx::elastic {

// The epoch's visiting order of the samples 0..size-1.
std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch);

struct StepSlice {
  int64_t begin = 0;  // positions in the permutation: this rank's [begin, end)
  int64_t end = 0;
  int64_t consumed_after = 0;  // the cursor once this step commits
  bool epoch_done = false;     // nothing (or a tail smaller than world) left
};
// The step at cursor `consumed` of an epoch of `size` samples, for `rank`
// of `world`, `batch` samples per rank.
StepSlice step_slice(int64_t size, int64_t consumed, int world, int rank, int64_t batch);

}  // namespace ddpx::elastic

#endif  // DDPX_ELASTIC_EPOCH_PLAN_H_
