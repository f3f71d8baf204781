#include "cuda/call_error.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status call_error(absl::StatusCode status_code, const FailedCall& call) {
  return absl::Status(
      status_code,
      absl::StrCat(call.library, " call ", call.call, " failed: ", call.code_name, " (",
                   call.code, ", ", call.description, ") at ", call.file, ":", call.line));
}

const char* nccl_result_name(int result) {
  switch (result) {
    case 0: return "ncclSuccess";
    case 1: return "ncclUnhandledCudaError";
    case 2: return "ncclSystemError";
    case 3: return "ncclInternalError";
    case 4: return "ncclInvalidArgument";
    case 5: return "ncclInvalidUsage";
    case 6: return "ncclRemoteError";
    case 7: return "ncclInProgress";
  }
  return "ncclUnknownResult";
}

absl::StatusCode nccl_result_status_code(int result) {
  switch (result) {
    case 0: return absl::StatusCode::kOk;
    case 4:  // ncclInvalidArgument
    case 5:  // ncclInvalidUsage
      return absl::StatusCode::kInvalidArgument;
    case 6:  // ncclRemoteError: a peer failed or went away
      return absl::StatusCode::kUnavailable;
    case 7:  // ncclInProgress: only non-blocking communicators return it
      return absl::StatusCode::kUnavailable;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace ddpx
