// The sync-pairs path of the Gloo backend's execution plan: Gloo's classic
// classes (sync_collectives.h, allreduce_algorithms.h) on the worker's sync
// context, whose pairs the op's thread reads itself (sync_pairs.h). Small
// ops take it; the plan's limits say which (execution_plan.cc). AVG reduces
// as SUM (CollectiveRunner divides). Throws gloo's exceptions.
#ifndef DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_PATH_H_
#define DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_PATH_H_

#include <cstddef>
#include <vector>

#include "core/dtype.h"
#include "core/options.h"
#include "process_group/gloo/execution_plan.h"
#include "process_group/gloo/op_context.h"

namespace ddpx {

class SyncPairsPath {
 public:
  // `c.sync_context` is the worker's sync context (the plan chose this path
  // for a group that has one).
  explicit SyncPairsPath(const OpContext& c) : c_(c) {}

  // `plan` is the plan's tcp_allreduce() for this size (on the sync pairs,
  // in one piece or in pieces of `piece_bytes`).
  void allreduce(const AllreducePlan& plan, size_t piece_bytes, void* data, size_t count,
                 DType dtype, ReduceOp op) const;
  void broadcast(void* data, size_t nbytes, int root) const;
  void allgather(const void* in, void* out, size_t nbytes_per_rank) const;
  // Gloo's ReduceScatterHalvingDoubling; `scratch` holds
  // reduce_scatter_scratch() elements.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                      void* scratch) const;
  static int64_t reduce_scatter_scratch(int64_t count, int size) { return count * size; }
  void gather(const void* in, void* out, size_t nbytes_per_rank, int root) const;
  void scatter(const std::vector<const void*>& inputs, void* out, size_t nbytes_per_rank,
               int root) const;
  void barrier() const;

 private:
  const OpContext& c_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_SYNC_PAIRS_PATH_H_
