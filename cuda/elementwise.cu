// Element-wise float32 kernels for PowerSGD on a device: elementwise_math.h's
// grid-stride bodies on a grid sized to the data.
#include "cuda/elementwise_math.h"
#include "cuda/kernels.h"
#include "cuda/launch_math.h"

namespace ddpx {
namespace cuda_kernels {
namespace {

__device__ inline int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t grid_threads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

__global__ void add_scaled_kernel(const float* a, float alpha, const float* b, float* out,
                                  int64_t n) {
  cuda_math::add_scaled_thread(a, alpha, b, out, n, global_thread(), grid_threads());
}

__global__ void divide_kernel(float* x, float divisor, int64_t n) {
  cuda_math::divide_thread(x, divisor, n, global_thread(), grid_threads());
}

__global__ void fill_kernel(float* x, float value, int64_t n) {
  cuda_math::fill_thread(x, value, n, global_thread(), grid_threads());
}

int blocks_for(int64_t n) { return cuda_math::grid_blocks(n, cuda_math::kThreadsPerBlock); }

}  // namespace

cudaError_t add_scaled(const float* a, float alpha, const float* b, float* out, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_scaled_kernel<<<blocks_for(n), cuda_math::kThreadsPerBlock, 0, stream>>>(a, alpha, b,
                                                                               out, n);
  return cudaGetLastError();
}

cudaError_t divide(float* x, float divisor, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  divide_kernel<<<blocks_for(n), cuda_math::kThreadsPerBlock, 0, stream>>>(x, divisor, n);
  return cudaGetLastError();
}

cudaError_t fill(float* x, float value, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), cuda_math::kThreadsPerBlock, 0, stream>>>(x, value, n);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace ddpx
