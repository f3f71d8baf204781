// The reducer's own averaging, for a model with no communication hook: each
// gradient is divided by the world size while it is copied into its bucket
// (one pass over the gradient, as torch's Reducer::mark_variable_ready_dense
// does with at::mul_out), and the bucket is then summed across ranks. The
// division is IEEE division by the world size, element by element, so a
// bucket ends bitwise as it would after a copy and a separate
// divide_in_place (hooks/bucket_math.h) over it.
#ifndef DDPX_REDUCER_DIVIDE_INTO_BUCKET_H_
#define DDPX_REDUCER_DIVIDE_INTO_BUCKET_H_

#include <string>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace ddpx {

// dst = src / divisor for CPU floating tensors of one dtype and element
// count; `src` may be `dst` itself (a gradient that is its bucket view).
// The error names `what`, the tensors and the problem.
absl::Status copy_divided(const Tensor& dst, const Tensor& src, int divisor,
                          const std::string& what);

}  // namespace ddpx

#endif  // DDPX_REDUCER_DIVIDE_INTO_BUCKET_H_
