// What one synchronized step of the reducer cost, for the trainer to print.
#ifndef DDPX_REDUCER_REDUCER_STATS_H_
#define DDPX_REDUCER_REDUCER_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddpx {

struct ReducerStats {
  // Synchronized steps finished so far (no_sync steps do not count).
  uint64_t step = 0;
  // Buckets reduced in this step (after the rebuild: the rebuilt layout).
  size_t num_buckets = 0;
  // Bytes of gradients handed to the hook or default reduction, uncompressed.
  uint64_t gradient_bytes = 0;
  // Payload bytes this rank gave the process group's collectives while its
  // buckets were being reduced (ProcessGroup::counters() delta). A hook that
  // talks through another group (e.g. a hierarchical one) is not counted.
  uint64_t bytes_communicated = 0;
  // gradient_bytes / bytes_communicated: 1 for allreduce, ~2 for fp16, large
  // for PowerSGD; 0 when nothing was sent.
  double compression_ratio = 0.0;
  // Time finalize_backward() spent blocked on communication: what overlap
  // with backward did not hide.
  double comm_wait_seconds = 0.0;
  // From the step's first mark_ready/prepare_for_backward to the end of
  // finalize_backward().
  double step_seconds = 0.0;
  // Parameters marked ready without a gradient (find_unused_parameters).
  size_t unused_parameters = 0;
  // Ranks still training this step (less than the world size under Join).
  int active_ranks = 0;
  // True for the step at whose end buckets were rebuilt from the ready order.
  bool buckets_rebuilt = false;
  // "default (allreduce)" or the registered hook's name.
  std::string hook;

  // One line: "step 3: 2 buckets, 1.2 MB grads, 1.2 MB sent (ratio 1.00), ..."
  std::string str() const;
};

}  // namespace ddpx

#endif  // DDPX_REDUCER_REDUCER_STATS_H_
