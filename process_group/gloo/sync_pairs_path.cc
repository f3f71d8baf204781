#include "process_group/gloo/sync_pairs_path.h"

#include "process_group/gloo/reduce_scatter_ring.h"
#include "process_group/gloo/sync_collectives.h"
#include "process_group/gloo/sync_pairs.h"

namespace ddpx {

void SyncPairsPath::allreduce(const AllreducePlan& plan, size_t piece_bytes, void* data,
                              size_t count, DType dtype, ReduceOp op) const {
  const AllreduceCall call = c_.allreduce_call(c_.sync_pairs(), data, count, dtype, op);
  if (plan.where == AllreducePlan::Where::kSyncPieces) {
    run_allreduce_in_pieces(plan.algorithm, call, piece_bytes);
  } else {
    run_allreduce(plan.algorithm, call);
  }
}

void SyncPairsPath::broadcast(void* data, size_t nbytes, int root) const {
  broadcast_classic(c_.sync_pairs(), data, nbytes, root);
}

void SyncPairsPath::allgather(const void* in, void* out, size_t nbytes_per_rank) const {
  allgather_classic(c_.sync_pairs(), in, out, nbytes_per_rank);
}

void SyncPairsPath::reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                                   ReduceOp op, void* scratch) const {
  run_reduce_scatter_halving_doubling(
      c_.reduce_scatter_call(c_.sync_pairs(), in, out, count, dtype, op, c_.tag), scratch);
}

void SyncPairsPath::gather(const void* in, void* out, size_t nbytes_per_rank, int root) const {
  gather_classic(c_.sync_pairs(), in, out, nbytes_per_rank, root);
}

void SyncPairsPath::scatter(const std::vector<const void*>& inputs, void* out,
                            size_t nbytes_per_rank, int root) const {
  scatter_classic(c_.sync_pairs(), inputs, out, nbytes_per_rank, root);
}

void SyncPairsPath::barrier() const { barrier_classic(c_.sync_pairs()); }

}  // namespace ddpx
