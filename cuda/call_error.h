// Turning a failed CUDA / cuBLAS / NCCL call into an absl::Status that names
// the call, the code's name and number, its description and where it was
// made. Plain C++ (no CUDA headers): the tables of NCCL result names and the
// mapping to absl codes are tested on the CPU in the default build.
#ifndef DDPX_CUDA_CALL_ERROR_H_
#define DDPX_CUDA_CALL_ERROR_H_

#include "absl/status/status.h"

namespace ddpx {

struct FailedCall {
  const char* library;      // "CUDA", "cuBLAS", "NCCL"
  const char* call;         // the source text of the call
  const char* code_name;    // "cudaErrorMemoryAllocation"
  int code;                 // its numeric value
  const char* description;  // the library's own words
  const char* file;
  int line;
};

// "CUDA call cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (2, out of
// memory) at cuda/cuda_allocator.cc:41".
absl::Status call_error(absl::StatusCode status_code, const FailedCall& call);

// ncclResult_t values are part of NCCL's ABI (nccl.h; cuda/nccl_check.cc
// static_asserts that they still match). NCCL itself has no name function.
const char* nccl_result_name(int result);
absl::StatusCode nccl_result_status_code(int result);

}  // namespace ddpx

#endif  // DDPX_CUDA_CALL_ERROR_H_
