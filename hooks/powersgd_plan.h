// Which parts of a bucket PowerSGD compresses, and where each compressed
// matrix's P and Q live in the bucket's contiguous P and Q memories.
#ifndef DDPX_HOOKS_POWERSGD_PLAN_H_
#define DDPX_HOOKS_POWERSGD_PLAN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hooks/powersgd_state.h"
#include "core/tensor.h"

namespace ddpx {

// A rows x cols row-major matrix at `offset` in the bucket, approximated by
// P (rows x rank) at p_offset and Q (cols x rank) at q_offset.
struct CompressedMatrix {
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t rank = 0;
  int64_t p_offset = 0;
  int64_t q_offset = 0;
};

struct CompressionPlan {
  // Grouped by (rows, cols) in order of first appearance, bucket order inside
  // a group: torch's shape_to_tensors order, so P/Q memories line up with
  // torch's (with or without batch_tensors_with_same_shape).
  std::vector<CompressedMatrix> matrices;
  // (offset, numel) of every tensor sent uncompressed, in bucket order.
  std::vector<std::pair<int64_t, int64_t>> uncompressed;
  int64_t uncompressed_numel = 0;
  int64_t p_numel = 0;
  int64_t q_numel = 0;
  // For the compression statistics.
  int64_t numel_before = 0;
  int64_t numel_after = 0;
};

// powerSGD_hook's plan for a bucket holding tensors of `shapes` at `offsets`.
// A tensor of shape (d0, d1, ...) is the matrix d0 x (d1 * ...). Tensors
// with fewer than 2 dimensions (biases, scalars) and matrices failing
// should_compress() with rank min(rows, cols, matrix_approximation_rank) go
// uncompressed. Fails if a tensor lies outside [0, bucket_numel).
absl::StatusOr<CompressionPlan> plan_layerwise(
    const std::vector<int64_t>& offsets, const std::vector<Shape>& shapes,
    int64_t bucket_numel, const PowerSGDOptions& options);

// batched_powerSGD_hook's plan: the whole bucket, zero-padded to a
// side x side square (side = ceil(sqrt(numel))), is one matrix compressed at
// rank min(matrix_approximation_rank, side), whatever the saving.
CompressionPlan plan_square(int64_t bucket_numel, const PowerSGDOptions& options);

// Same-shape matrices of a plan that the kernels take in one call each
// (one batched product, one Gram-Schmidt batch per factor): a run of
// consecutive plan entries with one (rows, cols, rank) whose matrices lie
// back to back in the bucket and whose P and Q blocks lie back to back in
// the factor memories.
struct MatrixGroup {
  size_t first = 0;  // index into plan.matrices
  int64_t count = 0;
};
std::vector<MatrixGroup> matrix_groups(const CompressionPlan& plan);

// ceil(sqrt(n)) computed exactly in integers.
int64_t square_side(int64_t n);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_PLAN_H_
