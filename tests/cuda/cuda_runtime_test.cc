// The checked-call macros against the real CUDA runtime, cuBLAS and NCCL
// libraries. None of this needs a device: the libraries name their codes
// without one, and asking for a device that is not there is itself a check.
#include <cublas_v2.h>
#include <nccl.h>

#include "cuda/check.h"
#include "cuda/nccl_check.h"
#include "cuda/stream.h"
#include "gtest/gtest.h"

namespace ddpx {
namespace {

absl::Status fails_with_cuda_error() {
  DDPX_CUDA_RETURN_IF_ERROR(cudaErrorMemoryAllocation);
  return absl::OkStatus();
}

TEST(CudaCheck, CudaErrorsNameTheCallAndTheCode) {
  absl::Status s = fails_with_cuda_error();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("CUDA call cudaErrorMemoryAllocation failed: "
                             "cudaErrorMemoryAllocation (2, "),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("cuda_runtime_test.cc:"), std::string::npos) << s;
  EXPECT_TRUE(DDPX_CUDA_CHECK(cudaSuccess).ok());
}

TEST(CudaCheck, CublasAndNcclCodesHaveTheirNames) {
  absl::Status blas = DDPX_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(absl::IsInvalidArgument(blas)) << blas;
  EXPECT_NE(blas.message().find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << blas;
  absl::Status nccl = DDPX_NCCL_CHECK(ncclInvalidUsage);
  EXPECT_TRUE(absl::IsInvalidArgument(nccl)) << nccl;
  EXPECT_NE(nccl.message().find("NCCL call ncclInvalidUsage failed: ncclInvalidUsage (5, "),
            std::string::npos)
      << nccl;
}

TEST(CudaCheck, NoDeviceIsReportedNotCrashed) {
  const int count = cuda_device_count();
  const std::string why = cuda_unavailable_reason();
  if (count > 0) {
    EXPECT_EQ(why, "");
    GTEST_SKIP() << "a GPU is present; the no-device path is not exercised";
  }
  EXPECT_NE(why, "") << "no device, yet no reason given";
  std::printf("no CUDA device here: %s\n", why.c_str());
  // Making a stream needs a device: the error must say which call failed.
  absl::StatusOr<CudaStream> stream = CudaStream::create(0);
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("CUDA call"), std::string::npos) << stream.status();
}

}  // namespace
}  // namespace ddpx
