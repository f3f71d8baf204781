// The libtorch dependency builds, links and runs: a convolution, backward,
// and the post-accumulate-grad hook DDP is built on (reducer/torch/).
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/conv.h>

#include <memory>

#include "gtest/gtest.h"

namespace {

TEST(Libtorch, ConvBackwardFiresPostAccumulateGradHook) {
  torch::manual_seed(0);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(1, 2, 3));
  int fired = 0;
  double seen_sum = 0;
  struct Hook : torch::autograd::PostAccumulateGradHook {
    Hook(int* f, double* s) : fired(f), sum(s) {}
    void operator()(const torch::autograd::Variable& v) override {
      ++*fired;
      *sum = v.grad().sum().item<double>();
    }
    int* fired;
    double* sum;
  };
  torch::autograd::impl::set_post_acc_grad_hooks(conv->weight,
                                                 std::make_unique<Hook>(&fired, &seen_sum));
  torch::Tensor y = conv->forward(torch::ones({1, 1, 5, 5}));
  y.sum().backward();
  EXPECT_EQ(fired, 1);
  // d(sum)/dw = number of output positions (3 x 3) per input of ones, per channel.
  EXPECT_DOUBLE_EQ(seen_sum, 2 * 9 * 9);
  EXPECT_EQ(conv->weight.grad().sum().item<double>(), seen_sum);
}

}  // namespace
