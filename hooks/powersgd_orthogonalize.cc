#include "hooks/powersgd_orthogonalize.h"

#include <cmath>

namespace ddpx {

int orthogonalize_columns(float* m, int64_t rows, int64_t cols, float epsilon) {
  int zero_columns = 0;
  for (int64_t i = 0; i < cols; ++i) {
    // Accumulate in double: P's columns can hold hundreds of thousands of
    // entries and float accumulation would drift from torch's pairwise sum.
    double sum_sq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double v = m[r * cols + i];
      sum_sq += v * v;
    }
    const float norm = static_cast<float>(std::sqrt(sum_sq));
    if (epsilon == 0.0f && norm == 0.0f) {
      ++zero_columns;
      for (int64_t r = 0; r < rows; ++r) m[r * cols + i] = 0.0f;
    } else {
      const float denom = norm + epsilon;
      for (int64_t r = 0; r < rows; ++r) m[r * cols + i] /= denom;
    }
    // Project column i out of every later column j.
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r)
        dot += static_cast<double>(m[r * cols + i]) * m[r * cols + j];
      const float d = static_cast<float>(dot);
      for (int64_t r = 0; r < rows; ++r) m[r * cols + j] -= d * m[r * cols + i];
    }
  }
  return zero_columns;
}

}  // namespace ddpx
