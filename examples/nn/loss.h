// ReLU and softmax cross-entropy (mean over the batch), torch semantics.
#ifndef DDPX_EXAMPLES_NN_LOSS_H_
#define DDPX_EXAMPLES_NN_LOSS_H_

#include <cstdint>

namespace ddpx::nn {

void relu_forward(float* x, int64_t n);  // in place
// dy *= (y > 0), where y is ReLU's output.
void relu_backward(const float* y, float* dy, int64_t n);

// logits [batch, classes], labels in [0, classes). Returns the mean loss and,
// when dlogits is not null, writes d(mean loss)/d(logits) = (softmax -
// onehot) / batch. Numerically stable (subtracts each row's max).
double softmax_cross_entropy(const float* logits, const int32_t* labels,
                             int64_t batch, int64_t classes, float* dlogits);

// Number of rows whose argmax equals the label.
int64_t count_correct(const float* logits, const int32_t* labels, int64_t batch,
                      int64_t classes);

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_LOSS_H_
