// Int8 min-max quantization kernels (format and math: quantize_math.h).
//
// Pass 1, one block per record: each thread folds a strided share of the
// chunk into a (min, max) pair, the block combines the pairs in tree order
// and thread 0 writes the record's header. Pass 2, a grid-stride loop over
// every element writes the codes. Decoding is one grid-stride pass.
#include "cuda/block_reduce.h"
#include "cuda/kernels.h"
#include "cuda/launch_math.h"
#include "cuda/quantize_math.h"

namespace ddpx {
namespace cuda_kernels {
namespace {

using cuda_math::MinMaxPair;

struct CombineMinMax {
  __device__ MinMaxPair operator()(MinMaxPair a, MinMaxPair b) const {
    return cuda_math::minmax_combine(a, b);
  }
};

__global__ void headers_kernel(const float* in, int64_t n, int64_t chunk, uint8_t* out) {
  __shared__ MinMaxPair shared[cuda_math::kThreadsPerBlock];
  const int64_t record = blockIdx.x;
  const int64_t elems = cuda_math::record_elems(record, n, chunk);
  MinMaxPair partial =
      cuda_math::minmax_thread(in + record * chunk, elems, threadIdx.x, blockDim.x);
  MinMaxPair total = cuda_math::block_reduce(partial, shared, CombineMinMax());
  if (threadIdx.x == 0) {
    cuda_math::write_header(out + cuda_math::record_offset(record, chunk),
                            cuda_math::minmax_finish(total, elems));
  }
}

__global__ void codes_kernel(const float* in, int64_t n, int64_t chunk, uint8_t* out) {
  int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  cuda_math::quantize_codes_thread(in, n, chunk, out, thread,
                                   static_cast<int64_t>(gridDim.x) * blockDim.x);
}

__global__ void dequantize_kernel(const uint8_t* in, int64_t n, int64_t chunk, float* out,
                                  bool accumulate) {
  int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  cuda_math::dequantize_thread(in, n, chunk, out, accumulate, thread,
                               static_cast<int64_t>(gridDim.x) * blockDim.x);
}

}  // namespace

cudaError_t quantize_minmax(const float* in, int64_t n, int64_t chunk, uint8_t* out,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (chunk <= 0) return cudaErrorInvalidValue;
  const int64_t records = cuda_math::quantized_records(n, chunk);
  if (records > 0x7fffffff) return cudaErrorInvalidValue;  // grid.x limit
  const int threads = cuda_math::kThreadsPerBlock;
  headers_kernel<<<static_cast<unsigned>(records), threads, 0, stream>>>(in, n, chunk, out);
  codes_kernel<<<cuda_math::grid_blocks(n, threads), threads, 0, stream>>>(in, n, chunk, out);
  return cudaGetLastError();
}

cudaError_t dequantize_minmax(const uint8_t* in, int64_t n, int64_t chunk, float* out,
                              bool accumulate, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (chunk <= 0) return cudaErrorInvalidValue;
  const int threads = cuda_math::kThreadsPerBlock;
  dequantize_kernel<<<cuda_math::grid_blocks(n, threads), threads, 0, stream>>>(
      in, n, chunk, out, accumulate);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace ddpx
