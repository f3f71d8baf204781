// float32 <-> float16/bfloat16 cast kernels: cast_math.h's grid-stride bodies
// (4-wide vector loads when aligned) on a grid sized to the data.
#include "cuda/cast_math.h"
#include "cuda/kernels.h"
#include "cuda/launch_math.h"

namespace ddpx {
namespace cuda_kernels {
namespace {

using cuda_math::Half16;

template <Half16 kind>
__global__ void from_float_kernel(const float* in, uint16_t* out, int64_t n) {
  int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  cuda_math::cast_from_float_thread<kind>(in, out, n, thread,
                                          static_cast<int64_t>(gridDim.x) * blockDim.x);
}

template <Half16 kind>
__global__ void to_float_kernel(const uint16_t* in, float* out, int64_t n) {
  int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  cuda_math::cast_to_float_thread<kind>(in, out, n, thread,
                                        static_cast<int64_t>(gridDim.x) * blockDim.x);
}

template <Half16 kind>
cudaError_t launch_from_float(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // One thread per four elements (the vector width), capped by grid_blocks.
  int blocks = cuda_math::grid_blocks((n + 3) / 4, cuda_math::kThreadsPerBlock);
  from_float_kernel<kind><<<blocks, cuda_math::kThreadsPerBlock, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

template <Half16 kind>
cudaError_t launch_to_float(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int blocks = cuda_math::grid_blocks((n + 3) / 4, cuda_math::kThreadsPerBlock);
  to_float_kernel<kind><<<blocks, cuda_math::kThreadsPerBlock, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t cast_float_to_half(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  return launch_from_float<Half16::kFloat16>(in, out, n, stream);
}
cudaError_t cast_half_to_float(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  return launch_to_float<Half16::kFloat16>(in, out, n, stream);
}
cudaError_t cast_float_to_bfloat16(const float* in, uint16_t* out, int64_t n,
                                   cudaStream_t stream) {
  return launch_from_float<Half16::kBFloat16>(in, out, n, stream);
}
cudaError_t cast_bfloat16_to_float(const uint16_t* in, float* out, int64_t n,
                                   cudaStream_t stream) {
  return launch_to_float<Half16::kBFloat16>(in, out, n, stream);
}

}  // namespace cuda_kernels
}  // namespace ddpx
