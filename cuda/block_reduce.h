// The order in which a block of threads combines its partial results: a tree
// over shared memory, slot t taking slot t + stride for stride = T/2, T/4, ..
// 1. The kernels run it on the GPU; the CPU tests replay it in the same order
// (reduce_in_tree_order), so a non-associative sum gives the same bits.
#ifndef DDPX_CUDA_BLOCK_REDUCE_H_
#define DDPX_CUDA_BLOCK_REDUCE_H_

#include <stdint.h>

#include "core/half.h"

namespace ddpx {
namespace cuda_math {

// `slots` is a power of two. Combines slots[0..slots) into slots[0].
template <typename T, typename Combine>
DDPX_HOST_DEVICE inline void reduce_in_tree_order(T* values, int slots, Combine combine) {
  for (int stride = slots / 2; stride > 0; stride /= 2)
    for (int t = 0; t < stride; ++t) values[t] = combine(values[t], values[t + stride]);
}

}  // namespace cuda_math
}  // namespace ddpx

#if defined(__CUDACC__)
namespace ddpx {
namespace cuda_math {

// Device side of the same order: every thread of the block calls it with its
// partial; all of them get the block's result. `shared` holds blockDim.x
// slots; blockDim.x is a power of two.
template <typename T, typename Combine>
__device__ inline T block_reduce(T partial, T* shared, Combine combine) {
  const int t = threadIdx.x;
  shared[t] = partial;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) shared[t] = combine(shared[t], shared[t + stride]);
    __syncthreads();
  }
  T result = shared[0];
  __syncthreads();  // shared may be reused right after
  return result;
}

}  // namespace cuda_math
}  // namespace ddpx
#endif  // __CUDACC__

#endif  // DDPX_CUDA_BLOCK_REDUCE_H_
