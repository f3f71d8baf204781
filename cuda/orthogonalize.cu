// Batched Gram-Schmidt for PowerSGD: one block per matrix, following
// orthogonalize_math.h step by step (the CPU tests replay the same steps).
#include "cuda/block_reduce.h"
#include "cuda/kernels.h"
#include "cuda/launch_math.h"
#include "cuda/orthogonalize_math.h"

namespace ddpx {
namespace cuda_kernels {
namespace {

__global__ void gram_schmidt_kernel(float* matrices, int64_t rows, int cols, float epsilon) {
  __shared__ double shared[cuda_math::kThreadsPerBlock];
  float* m = matrices + blockIdx.x * rows * cols;
  const int t = threadIdx.x;
  const int nthreads = blockDim.x;
  cuda_math::AddDouble add;
  for (int i = 0; i < cols; ++i) {
    double sum_sq = cuda_math::block_reduce(
        cuda_math::gs_partial_dot(m, rows, cols, i, i, t, nthreads), shared, add);
    cuda_math::gs_normalize_rows(m, rows, cols, i, cuda_math::gs_denominator(sum_sq, epsilon),
                                 t, nthreads);
    for (int j = i + 1; j < cols; ++j) {
      // Each thread reads only rows it wrote itself, so block_reduce's
      // barriers are all the ordering needed.
      double dot = cuda_math::block_reduce(
          cuda_math::gs_partial_dot(m, rows, cols, i, j, t, nthreads), shared, add);
      cuda_math::gs_project_rows(m, rows, cols, i, j, static_cast<float>(dot), t, nthreads);
    }
  }
}

}  // namespace

cudaError_t orthogonalize_gram_schmidt(float* matrices, int batch, int64_t rows, int cols,
                                       float epsilon, cudaStream_t stream) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
  gram_schmidt_kernel<<<batch, cuda_math::kThreadsPerBlock, 0, stream>>>(matrices, rows, cols,
                                                                        epsilon);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace ddpx
