// Grid sizing shared by the kernels and by the CPU tests that replay a grid.
#ifndef DDPX_CUDA_LAUNCH_MATH_H_
#define DDPX_CUDA_LAUNCH_MATH_H_

#include <cstdint>

#include "core/half.h"

namespace ddpx {
namespace cuda_math {

inline constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill an H100 several times over; beyond this the
// grid-stride loops take over, so huge tensors need no huge grids.
inline constexpr int64_t kMaxBlocks = 4096;

// Blocks for `work_items` independent items at `threads` per block; at least 1.
DDPX_HOST_DEVICE inline int grid_blocks(int64_t work_items, int threads) {
  int64_t blocks = (work_items + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<int>(blocks);
}

}  // namespace cuda_math
}  // namespace ddpx

#endif  // DDPX_CUDA_LAUNCH_MATH_H_
