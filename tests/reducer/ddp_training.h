// Training loops for the DDP tests: the same model trained under DDP on N
// ranks, and in one process on the union of their batches.
#ifndef DDPX_TESTS_REDUCER_DDP_TRAINING_H_
#define DDPX_TESTS_REDUCER_DDP_TRAINING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "reducer/distributed_data_parallel.h"
#include "tests/reducer/regression_model.h"

namespace ddpx {
namespace reducer_test {

// Sizes of the test model: four parameters of 12 to 240 bytes.
inline constexpr int kIn = 6, kHidden = 10, kOut = 3;
inline constexpr float kLr = 0.1f;

// Rank `rank`'s batch at `step` when each of `world` ranks takes `per_rank`
// consecutive samples.
inline Batch rank_batch(int step, int rank, int world, int per_rank) {
  return make_batch((static_cast<int64_t>(step) * world + rank) * per_rank, per_rank, kIn, kOut);
}

// One synchronized (or, under no_sync, local) DDP step: forward/backward
// calling mark_ready, finalize, and the SGD update when `apply` is set.
absl::Status ddp_train_step(RegressionModel& model, DistributedDataParallel& ddp,
                            const Batch& batch, bool apply = true,
                            std::vector<size_t> ready_order = {},
                            const std::vector<size_t>& skip = {});

// The model rank 0 starts from, trained without DDP for `steps` steps on the
// union of all `world` ranks' batches.
std::vector<float> train_single_process(int world, int steps, int per_rank);

// Bucket caps small enough that the test model gets several buckets.
DDPOptions small_buckets();
// DDP over `params` with small_buckets(); aborts if construction fails.
std::unique_ptr<DistributedDataParallel> make_small_bucket_ddp(
    ModelParameters& params, std::shared_ptr<ProcessGroup> pg, bool bucket_view);

}  // namespace reducer_test
}  // namespace ddpx

#endif  // DDPX_TESTS_REDUCER_DDP_TRAINING_H_
