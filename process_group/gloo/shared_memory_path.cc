#include "process_group/gloo/shared_memory_path.h"

#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/shm/alltoall.h"

namespace ddpx {

shm::Reduction SharedMemoryPath::reduction(DType dtype, ReduceOp op) {
  return shm::Reduction{reduce_function(dtype, op), dtype_size(dtype),
                        static_cast<uint8_t>(1 + static_cast<int>(dtype) * 8 + static_cast<int>(op))};
}

void SharedMemoryPath::allreduce(void* data, size_t count, DType dtype, ReduceOp op) const {
  throw_if_error(shm::allreduce(*c_.shm, data, count, reduction(dtype, op), c_.shm_deadline()));
}

void SharedMemoryPath::broadcast(void* data, size_t nbytes, int root) const {
  throw_if_error(shm::broadcast(*c_.shm, data, nbytes, root, c_.shm_deadline()));
}

void SharedMemoryPath::reduce(void* data, size_t count, DType dtype, ReduceOp op,
                              int root) const {
  throw_if_error(shm::reduce(*c_.shm, data, count, reduction(dtype, op), root, c_.shm_deadline()));
}

void SharedMemoryPath::allgather(const void* in, void* out, size_t nbytes_per_rank) const {
  throw_if_error(shm::allgather(*c_.shm, in, out, nbytes_per_rank, c_.shm_deadline()));
}

void SharedMemoryPath::reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                                      ReduceOp op) const {
  throw_if_error(
      shm::reduce_scatter(*c_.shm, in, out, count, reduction(dtype, op), c_.shm_deadline()));
}

void SharedMemoryPath::alltoall(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                                const std::vector<int64_t>& recv_bytes) const {
  throw_if_error(shm::alltoall(*c_.shm, in, send_bytes, out, recv_bytes, c_.shm_deadline()));
}

void SharedMemoryPath::barrier() const { throw_if_error(shm::barrier(*c_.shm, c_.shm_deadline())); }

}  // namespace ddpx
