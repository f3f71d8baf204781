// Seeded, platform-independent random numbers for parameter initialization.
//
// std::uniform_real_distribution is implementation-defined, so two builds
// could start from different weights; this generator's output depends only
// on the seed.
#ifndef DDPX_EXAMPLES_NN_INIT_H_
#define DDPX_EXAMPLES_NN_INIT_H_

#include <cstdint>

#include "core/tensor.h"

namespace ddpx::nn {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits (exact in float32).
  float uniform01();
  float uniform(float low, float high) { return low + (high - low) * uniform01(); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

// torch.nn.Linear's default init: kaiming_uniform_(a=sqrt(5)) on the weight,
// which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the
// bias. `t` is float32 on the CPU.
void init_uniform_fan_in(const Tensor& t, int64_t fan_in, Rng& rng);

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_INIT_H_
