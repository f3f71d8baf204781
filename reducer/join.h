// Uneven inputs (torch's Join context manager for DDP).
//
// Every rank creates a Join before its training loop. While it lives, each
// synchronized step starts with a small allreduce in which every rank says
// whether it is still training. A rank that runs out of batches calls
// join(): it keeps answering "not active" and shadows the active ranks'
// steps (their bucket collectives, with zero gradients, through the same
// hook), until every rank has joined. Then the model of the last rank to
// join is broadcast to all, so every replica ends equal.
//
//   Join join(*ddp);
//   for (batch : my_batches) { forward; backward + mark_ready; finalize; step; }
//   absl::Status s = join.join();
//
// Gradients stay averaged over the full world size (joined ranks add zeros),
// as torch does by default. With throw_on_early_termination, the first rank
// to run out makes every rank fail instead: active ranks' next step errors
// naming the joined rank, and the joined rank's join() errors.
#ifndef DDPX_REDUCER_JOIN_H_
#define DDPX_REDUCER_JOIN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "reducer/distributed_data_parallel.h"

namespace ddpx {

struct JoinOptions {
  bool throw_on_early_termination = false;
};

class Join {
 public:
  explicit Join(DistributedDataParallel& ddp, JoinOptions options = {});
  // Joins if join() was not called (an error is printed, not returned).
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank is out of inputs: shadow the others until all are done, then
  // sync the final model. Collective across the group; call once.
  absl::Status join();
  // Steps this rank shadowed for the others.
  int64_t shadowed_steps() const { return shadowed_steps_; }

 private:
  absl::Status run_join();

  DistributedDataParallel& ddp_;
  JoinOptions options_;
  bool joined_ = false;
  int64_t shadowed_steps_ = 0;
};

}  // namespace ddpx

#endif  // DDPX_REDUCER_JOIN_H_
