#include "cuda/check.h"

namespace ddpx {
namespace {

absl::StatusCode cuda_status_code(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidConfiguration:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode cublas_status_code(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED: return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_INVALID_VALUE: return absl::StatusCode::kInvalidArgument;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::StatusCode::kFailedPrecondition;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status cuda_status(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return call_error(cuda_status_code(error),
                    FailedCall{"CUDA", call, cudaGetErrorName(error), static_cast<int>(error),
                               cudaGetErrorString(error), file, line});
}

absl::Status cublas_status(cublasStatus_t status, const char* call, const char* file,
                           int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return call_error(cublas_status_code(status),
                    FailedCall{"cuBLAS", call, cublasGetStatusName(status),
                               static_cast<int>(status), cublasGetStatusString(status), file,
                               line});
}

}  // namespace ddpx
