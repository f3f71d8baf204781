#include "cuda/nccl_check.h"

namespace ddpx {

// call_error.cc names results by number; keep it honest.
static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 &&
                  ncclInternalError == 3 && ncclInvalidArgument == 4 &&
                  ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7,
              "ncclResult_t values changed; update cuda/call_error.cc");

absl::Status nccl_status(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  int code = static_cast<int>(result);
  return call_error(nccl_result_status_code(code),
                    FailedCall{"NCCL", call, nccl_result_name(code), code,
                               ncclGetErrorString(result), file, line});
}

}  // namespace ddpx
