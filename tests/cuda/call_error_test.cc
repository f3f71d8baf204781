#include "cuda/call_error.h"

#include "gtest/gtest.h"

namespace ddpx {
namespace {

TEST(CallError, MessageNamesTheCallTheCodeAndThePlace) {
  absl::Status s = call_error(absl::StatusCode::kResourceExhausted,
                              FailedCall{"CUDA", "cudaMalloc(&p, n)", "cudaErrorMemoryAllocation",
                                         2, "out of memory", "cuda/x.cc", 42});
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_EQ(s.message(),
            "CUDA call cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (2, out of memory) "
            "at cuda/x.cc:42");
}

TEST(CallError, NcclResultNamesAndCodes) {
  EXPECT_STREQ(nccl_result_name(0), "ncclSuccess");
  EXPECT_STREQ(nccl_result_name(4), "ncclInvalidArgument");
  EXPECT_STREQ(nccl_result_name(6), "ncclRemoteError");
  EXPECT_STREQ(nccl_result_name(99), "ncclUnknownResult");
  EXPECT_EQ(nccl_result_status_code(0), absl::StatusCode::kOk);
  EXPECT_EQ(nccl_result_status_code(5), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nccl_result_status_code(6), absl::StatusCode::kUnavailable);
  EXPECT_EQ(nccl_result_status_code(1), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace ddpx
