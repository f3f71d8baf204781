// GPU tests call DDPX_SKIP_WITHOUT_GPU() first: without a device they skip
// with the reason CUDA gave, so a CI log on a machine without a GPU says
// plainly that nothing ran on one.
#ifndef DDPX_TESTS_CUDA_GPU_SKIP_H_
#define DDPX_TESTS_CUDA_GPU_SKIP_H_

#include "cuda/stream.h"
#include "gtest/gtest.h"

#define DDPX_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                               \
    std::string ddpx_no_gpu_ = ::ddpx::cuda_unavailable_reason();                    \
    if (!ddpx_no_gpu_.empty()) {                                                     \
      GTEST_SKIP() << "NO GPU: this test needs a CUDA device and did NOT run: "      \
                   << ddpx_no_gpu_;                                                  \
    }                                                                                \
  } while (0)

#endif  // DDPX_TESTS_CUDA_GPU_SKIP_H_
