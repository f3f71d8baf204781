#include "hooks/powersgd_plan.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::StatusOr<CompressionPlan> plan_layerwise(
    const std::vector<int64_t>& offsets, const std::vector<Shape>& shapes,
    int64_t bucket_numel, const PowerSGDOptions& options) {
  if (offsets.size() != shapes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: bucket has ", offsets.size(), " offsets but ", shapes.size(),
        " shapes"));
  }
  CompressionPlan plan;
  std::vector<CompressedMatrix> candidates;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t numel = shape_numel(shapes[i]);
    if (offsets[i] < 0 || offsets[i] + numel > bucket_numel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PowerSGD: gradient ", i, " of shape ", shape_str(shapes[i]),
          " at offset ", offsets[i], " lies outside the bucket of ",
          bucket_numel, " elements"));
    }
    plan.numel_before += numel;
    bool compress = false;
    CompressedMatrix m;
    if (shapes[i].size() >= 2 && numel > 0) {
      m.offset = offsets[i];
      m.rows = shapes[i][0];
      m.cols = numel / m.rows;
      m.rank = std::min({m.rows, m.cols, options.matrix_approximation_rank});
      compress = should_compress(m.rows, m.cols, m.rank,
                                 options.min_compression_rate);
    }
    if (compress) {
      candidates.push_back(m);
      plan.numel_after += (m.rows + m.cols) * m.rank;
    } else {
      plan.uncompressed.emplace_back(offsets[i], numel);
      plan.uncompressed_numel += numel;
      plan.numel_after += numel;
    }
  }
  // Group by matrix shape, first appearance first (torch's defaultdict order).
  std::map<std::pair<int64_t, int64_t>, size_t> group_of_shape;
  std::vector<std::vector<CompressedMatrix>> groups;
  for (const CompressedMatrix& m : candidates) {
    auto key = std::make_pair(m.rows, m.cols);
    auto it = group_of_shape.find(key);
    if (it == group_of_shape.end()) {
      it = group_of_shape.emplace(key, groups.size()).first;
      groups.emplace_back();
    }
    groups[it->second].push_back(m);
  }
  for (auto& group : groups) {
    for (CompressedMatrix& m : group) {
      m.p_offset = plan.p_numel;
      m.q_offset = plan.q_numel;
      plan.p_numel += m.rows * m.rank;
      plan.q_numel += m.cols * m.rank;
      plan.matrices.push_back(m);
    }
  }
  return plan;
}

int64_t square_side(int64_t n) {
  int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (side * side < n) ++side;
  while (side > 0 && (side - 1) * (side - 1) >= n) --side;
  return side;
}

CompressionPlan plan_square(int64_t bucket_numel, const PowerSGDOptions& options) {
  CompressionPlan plan;
  const int64_t side = square_side(bucket_numel);
  plan.numel_before = bucket_numel;
  if (side == 0) return plan;
  CompressedMatrix m;
  m.rows = side;
  m.cols = side;
  m.rank = std::min(options.matrix_approximation_rank, side);
  plan.matrices.push_back(m);
  plan.p_numel = side * m.rank;
  plan.q_numel = side * m.rank;
  plan.numel_after = 2 * side * m.rank;
  return plan;
}

std::vector<MatrixGroup> matrix_groups(const CompressionPlan& plan) {
  std::vector<MatrixGroup> groups;
  for (size_t i = 0; i < plan.matrices.size(); ++i) {
    const CompressedMatrix& mat = plan.matrices[i];
    if (!groups.empty()) {
      const CompressedMatrix& prev = plan.matrices[i - 1];
      const bool same_shape =
          mat.rows == prev.rows && mat.cols == prev.cols && mat.rank == prev.rank;
      const bool follows = mat.offset == prev.offset + prev.rows * prev.cols &&
                           mat.p_offset == prev.p_offset + prev.rows * prev.rank &&
                           mat.q_offset == prev.q_offset + prev.cols * prev.rank;
      if (same_shape && follows) {
        ++groups.back().count;
        continue;
      }
    }
    groups.push_back(MatrixGroup{i, 1});
  }
  return groups;
}

}  // namespace ddpx
