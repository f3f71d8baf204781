// Checked NCCL calls (see cuda/check.h for CUDA and cuBLAS):
//
//   DDPX_NCCL_RETURN_IF_ERROR(ncclAllReduce(...));
#ifndef DDPX_CUDA_NCCL_CHECK_H_
#define DDPX_CUDA_NCCL_CHECK_H_

#include <nccl.h>

#include "absl/status/status.h"
#include "cuda/call_error.h"

namespace ddpx {

absl::Status nccl_status(ncclResult_t result, const char* call, const char* file, int line);

}  // namespace ddpx

#define DDPX_NCCL_CHECK(call) ::ddpx::nccl_status((call), #call, __FILE__, __LINE__)

#define DDPX_NCCL_RETURN_IF_ERROR(call)                        \
  do {                                                         \
    ::absl::Status ddpx_nccl_status_ = DDPX_NCCL_CHECK(call);  \
    if (!ddpx_nccl_status_.ok()) return ddpx_nccl_status_;     \
  } while (0)

#endif  // DDPX_CUDA_NCCL_CHECK_H_
