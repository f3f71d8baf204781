// The event-loop path of the Gloo backend's execution plan: Gloo's
// unbound-buffer collectives (gloo::allreduce, gloo::broadcast, ...) and
// the reduce-scatter ring (reduce_scatter_ring.h) on the worker's own
// context, whose pairs Gloo's event-loop thread reads. Every op has it and
// it takes every size: the fallback of every row of the plan. Each call
// takes the op's timeout; AVG reduces as SUM (CollectiveRunner divides).
// Throws gloo's exceptions.
#ifndef DDPX_PROCESS_GROUP_GLOO_EVENT_LOOP_PATH_H_
#define DDPX_PROCESS_GROUP_GLOO_EVENT_LOOP_PATH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/options.h"
#include "process_group/gloo/allreduce_algorithms.h"
#include "process_group/gloo/op_context.h"

namespace ddpx {

class EventLoopPath {
 public:
  explicit EventLoopPath(const OpContext& c) : c_(c) {}

  // `algorithm` is one of the unbound-buffer ones (the plan's tcp_allreduce).
  void allreduce(AllreduceAlgorithm algorithm, void* data, size_t count, DType dtype,
                 ReduceOp op) const;
  // No bytes: nothing to send.
  void broadcast(void* data, size_t nbytes, int root) const;
  void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) const;
  void allgather(const void* in, void* out, size_t nbytes_per_rank, uint32_t tag) const;
  // The ring; `scratch` holds reduce_scatter_scratch() elements.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                      uint32_t tag, void* scratch) const;
  // The ring's scratch elements: its second buffer (3+ ranks) and a
  // stand-in output when `out` lies inside `in` (the ring receives into the
  // output while it still reads the input). A null `in` stands for a private
  // copy, which nothing overlaps.
  static int64_t reduce_scatter_scratch(const void* in, const void* out, size_t count,
                                        DType dtype, int size);
  // `out` is read only on the root.
  void gather(const void* in, void* out, size_t nbytes_per_rank, int root) const;
  // `inputs` is read only on the root.
  void scatter(const std::vector<uint8_t*>& inputs, void* out, size_t nbytes_per_rank,
               int root) const;
  // Equal blocks of `in_nbytes / size` to every rank, of `out_nbytes / size`
  // from every rank.
  void alltoall(const void* in, size_t in_nbytes, void* out, size_t out_nbytes) const;
  // in_bytes[r] to rank r, out_bytes[r] from rank r; either side may be empty.
  void alltoallv(const void* in, const std::vector<int64_t>& in_bytes, void* out,
                 const std::vector<int64_t>& out_bytes) const;
  void barrier() const;

 private:
  const OpContext& c_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_EVENT_LOOP_PATH_H_
