// The random numbers PowerSGD draws: one seed per (re)initialization of the Qs
// from a generator seeded by `random_seed`, identical on every rank, and
// standard normal values from that seed.
//
// torch draws from numpy's RandomState and torch's CPU generator; matching
// those bit for bit is not a goal (the reference tests fix Q through the
// p/q memory instead). What matters is that every rank draws the same values,
// that the generator's whole state is one integer (so it checkpoints), and
// that the stream does not depend on the platform's <random>.
#ifndef DDPX_HOOKS_POWERSGD_RANDOM_H_
#define DDPX_HOOKS_POWERSGD_RANDOM_H_

#include <cstdint>

namespace ddpx {

// SplitMix64: a 64-bit state advanced by a constant, hashed on output.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  uint64_t state() const { return state_; }
  void set_state(uint64_t state) { state_ = state; }

 private:
  uint64_t state_;
};

// Fills out[0..n) with N(0, 1) values from `seed` (Box-Muller in double).
void fill_standard_normal(float* out, int64_t n, uint64_t seed);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_RANDOM_H_
