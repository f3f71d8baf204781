#include "tests/hooks/powersgd/batched_reference.h"

#include <cmath>
#include <utility>

#include "hooks/powersgd_plan.h"

namespace ddpx {
namespace powersgd_test {
namespace {

// torch's _orthogonalize_gram_schmidt with epsilon 0 on one rows x cols
// matrix: normalize column i, then take it out of every later column.
void gram_schmidt(std::vector<double>& m, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) {
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r) norm += m[r * cols + i] * m[r * cols + i];
    norm = std::sqrt(norm);
    for (int64_t r = 0; r < rows; ++r) m[r * cols + i] /= norm;
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) dot += m[r * cols + i] * m[r * cols + j];
      for (int64_t r = 0; r < rows; ++r) m[r * cols + j] -= dot * m[r * cols + i];
    }
  }
}

}  // namespace

BatchedPowerSGDReference::BatchedPowerSGDReference(int world, int64_t length,
                                                   int64_t rank, bool error_feedback,
                                                   std::vector<double> q_init)
    : world_(world),
      length_(length),
      side_(square_side(length)),
      rank_(rank),
      error_feedback_(error_feedback),
      q_(std::move(q_init)),
      errors_(world) {}

std::vector<double> BatchedPowerSGDReference::step(
    const std::vector<std::vector<float>>& inputs) {
  const int64_t n = side_, k = rank_, padded = n * n;
  // input_tensor.resize_(padded); padding filled with 0; add_(error);
  // input_tensor_cp = clone.
  std::vector<std::vector<double>> matrix(world_, std::vector<double>(padded, 0.0));
  for (int r = 0; r < world_; ++r) {
    for (int64_t i = 0; i < length_; ++i) matrix[r][i] = inputs[r][i];
    if (error_feedback_) {
      if (errors_[r].empty()) errors_[r].assign(padded, 0.0);
      for (int64_t i = 0; i < padded; ++i) matrix[r][i] += errors_[r][i];
    }
  }
  const std::vector<std::vector<double>> input_cp = matrix;
  // _orthogonalize(Q); P = matrix Q; all_reduce(P) (a sum, not divided).
  gram_schmidt(q_, n, k);
  std::vector<double> p(n * k, 0.0);
  for (int r = 0; r < world_; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < k; ++c) p[i * k + c] += matrix[r][i * n + j] * q_[j * k + c];
  // compute_q: _orthogonalize(P); Q = matrix^T P; all_reduce(Q).
  gram_schmidt(p, n, k);
  std::vector<double> q(n * k, 0.0);
  for (int r = 0; r < world_; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < k; ++c) q[j * k + c] += matrix[r][i * n + j] * p[i * k + c];
  // decompress: Q.div_(world_size); matrix = P Q^T; error = cp - matrix.
  for (double& v : q) v /= world_;
  q_ = q;
  std::vector<double> out(padded, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < k; ++c) out[i * n + j] += p[i * k + c] * q_[j * k + c];
  if (error_feedback_) {
    for (int r = 0; r < world_; ++r)
      for (int64_t i = 0; i < padded; ++i) errors_[r][i] = input_cp[r][i] - out[i];
  }
  // input_tensor.resize_(total_length).
  out.resize(length_);
  return out;
}

}  // namespace powersgd_test
}  // namespace ddpx
