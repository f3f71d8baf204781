#include "examples/nn/loss.h"

#include <cmath>

namespace ddpx::nn {

// Both written as branch-free selects so they vectorize (they run over
// every hidden activation twice per step).
void relu_forward(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* __restrict y, float* __restrict dy, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

double softmax_cross_entropy(const float* logits, const int32_t* labels,
                             int64_t batch, int64_t classes, float* dlogits) {
  double total = 0.0;
  for (int64_t r = 0; r < batch; ++r) {
    const float* row = logits + r * classes;
    float max = row[0];
    for (int64_t j = 1; j < classes; ++j) max = std::fmax(max, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(double(row[j]) - max);
    const double log_sum = std::log(sum) + max;
    total += log_sum - row[labels[r]];
    if (dlogits != nullptr) {
      float* d = dlogits + r * classes;
      for (int64_t j = 0; j < classes; ++j) {
        const double p = std::exp(double(row[j]) - log_sum);
        d[j] = static_cast<float>((p - (j == labels[r] ? 1.0 : 0.0)) / batch);
      }
    }
  }
  return total / batch;
}

int64_t count_correct(const float* logits, const int32_t* labels, int64_t batch,
                      int64_t classes) {
  int64_t correct = 0;
  for (int64_t r = 0; r < batch; ++r) {
    const float* row = logits + r * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (row[j] > row[best]) best = j;
    if (best == labels[r]) ++correct;
  }
  return correct;
}

}  // namespace ddpx::nn
