// torch's batched_powerSGD_hook (torch/distributed/algorithms/ddp_comm_hooks/
// powerSGD_hook.py, torch 2.15) transcribed statement by statement in double
// precision, every rank of the group at once: the reference the batched hook
// is checked against over many steps, where torch's own hook cannot run (it
// asserts in _orthogonalize on a 2-D Q) and the goldens are kept small.
#ifndef DDPX_TESTS_HOOKS_POWERSGD_BATCHED_REFERENCE_H_
#define DDPX_TESTS_HOOKS_POWERSGD_BATCHED_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace ddpx {
namespace powersgd_test {

class BatchedPowerSGDReference {
 public:
  // `q_init` (side x rank, row-major) stands for torch's q_memory_dict entry
  // of the first compressed step; warm start is on (torch's default).
  BatchedPowerSGDReference(int world, int64_t length, int64_t rank,
                           bool error_feedback, std::vector<double> q_init);

  // One compressed step: inputs[r] is rank r's bucket (length values); returns
  // what every rank's bucket holds afterwards.
  std::vector<double> step(const std::vector<std::vector<float>>& inputs);

  int64_t side() const { return side_; }
  // Rank r's error over the padded square (empty before the first step).
  const std::vector<double>& error(int r) const { return errors_[r]; }
  const std::vector<double>& q_memory() const { return q_; }

 private:
  int world_;
  int64_t length_, side_, rank_;
  bool error_feedback_;
  std::vector<double> q_;
  std::vector<std::vector<double>> errors_;
};

}  // namespace powersgd_test
}  // namespace ddpx

#endif  // DDPX_TESTS_HOOKS_POWERSGD_BATCHED_REFERENCE_H_
