// Checked CUDA and cuBLAS calls. Every call into those libraries goes through
// one of these, so a failure surfaces as an absl::Status naming the call:
//
//   DDPX_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, kind, stream));
//   absl::Status s = DDPX_CUDA_CHECK(cudaStreamSynchronize(stream));
//
// (NCCL's live in cuda/nccl_check.h, so users of the kernels need no NCCL.)
#ifndef DDPX_CUDA_CHECK_H_
#define DDPX_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "cuda/call_error.h"

namespace ddpx {

absl::Status cuda_status(cudaError_t error, const char* call, const char* file, int line);
absl::Status cublas_status(cublasStatus_t status, const char* call, const char* file,
                           int line);

}  // namespace ddpx

#define DDPX_CUDA_CHECK(call) ::ddpx::cuda_status((call), #call, __FILE__, __LINE__)
#define DDPX_CUBLAS_CHECK(call) ::ddpx::cublas_status((call), #call, __FILE__, __LINE__)

#define DDPX_CUDA_RETURN_IF_ERROR(call)                           \
  do {                                                            \
    ::absl::Status ddpx_cuda_status_ = DDPX_CUDA_CHECK(call);     \
    if (!ddpx_cuda_status_.ok()) return ddpx_cuda_status_;        \
  } while (0)

#define DDPX_CUBLAS_RETURN_IF_ERROR(call)                         \
  do {                                                            \
    ::absl::Status ddpx_cublas_status_ = DDPX_CUBLAS_CHECK(call); \
    if (!ddpx_cublas_status_.ok()) return ddpx_cublas_status_;    \
  } while (0)

#endif  // DDPX_CUDA_CHECK_H_
