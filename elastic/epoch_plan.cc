#include "elastic/epoch_plan.h"

#include <algorithm>
#include <numeric>

namespace ddpx::elastic {
namespace {

// splitmix64: the same sequence on every platform (std's distributions are
// implementation-defined).
uint64_t next(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(size, 0)));
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed * 0x100000001B3ULL + static_cast<uint64_t>(epoch);
  for (int64_t i = size - 1; i > 0; --i) {
    std::swap(order[i], order[next(&state) % static_cast<uint64_t>(i + 1)]);
  }
  return order;
}

StepSlice step_slice(int64_t size, int64_t consumed, int world, int rank, int64_t batch) {
  StepSlice s;
  const int64_t take = std::min<int64_t>(world * batch, size - consumed);
  if (take < world) {
    s.epoch_done = true;
    s.begin = s.end = s.consumed_after = consumed;
    return s;
  }
  s.begin = consumed + take * rank / world;
  s.end = consumed + take * (rank + 1) / world;
  s.consumed_after = consumed + take;
  return s;
}

}  // namespace ddpx::elastic
