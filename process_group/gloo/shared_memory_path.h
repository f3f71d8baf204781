// The shared-memory path of the Gloo backend's execution plan: the worker's
// channel (process_group/shm/) for a group whose ranks all share one host.
// It has allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall
// and barrier, at every size. AVG reduces as SUM (CollectiveRunner divides).
// Failures are thrown as StatusError with the channel's decided status
// (which names the timeout and the rank waited for).
#ifndef DDPX_PROCESS_GROUP_GLOO_SHARED_MEMORY_PATH_H_
#define DDPX_PROCESS_GROUP_GLOO_SHARED_MEMORY_PATH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/options.h"
#include "process_group/gloo/op_context.h"
#include "process_group/shm/collectives.h"

namespace ddpx {

class SharedMemoryPath {
 public:
  // `c.shm` is the worker's channel (the plan chose this path for a group
  // that has one).
  explicit SharedMemoryPath(const OpContext& c) : c_(c) {}

  // The Reduction the channel needs for dtype and op.
  static shm::Reduction reduction(DType dtype, ReduceOp op);

  void allreduce(void* data, size_t count, DType dtype, ReduceOp op) const;
  void broadcast(void* data, size_t nbytes, int root) const;
  // Only `root`'s data changes.
  void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) const;
  // `out` gets rank r's `nbytes_per_rank` at r.
  void allgather(const void* in, void* out, size_t nbytes_per_rank) const;
  // `in` holds size chunks of `count` elements; `out` gets chunk rank's.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) const;
  // alltoall_base's bytes: `in` holds send_bytes[r] for rank r after the
  // blocks for ranks before r; `out` gets recv_bytes[r] from rank r likewise.
  void alltoall(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                const std::vector<int64_t>& recv_bytes) const;
  void barrier() const;

 private:
  const OpContext& c_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SHARED_MEMORY_PATH_H_
