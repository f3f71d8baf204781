// The example NN library: gradients against finite differences, SGD against
// a hand computation, training actually lowering the loss.
#include <cmath>
#include <sstream>
#include <vector>

#include "examples/nn/init.h"
#include "examples/nn/loss.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "gtest/gtest.h"

namespace ddpx::nn {
namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch random_batch(int64_t n, int64_t inputs, int64_t classes, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  for (int64_t i = 0; i < n * inputs; ++i) b.x.push_back(rng.uniform(-1, 1));
  for (int64_t i = 0; i < n; ++i) b.y.push_back(static_cast<int32_t>(rng.below(classes)));
  return b;
}

double loss_of(Mlp& model, const Batch& b) {
  const int64_t n = static_cast<int64_t>(b.y.size());
  const float* logits = model.forward(b.x.data(), n);
  return softmax_cross_entropy(logits, b.y.data(), n, model.config().classes, nullptr);
}

TEST(MlpTest, GradientsMatchFiniteDifferences) {
  Mlp model({/*inputs=*/5, /*hidden=*/{7, 6}, /*classes=*/4, /*seed=*/3});
  Batch b = random_batch(8, 5, 4, 11);
  model.forward(b.x.data(), 8);
  model.backward(b.y.data(), nullptr);
  // Central differences in double on the float model; eps large enough that
  // float rounding in the loss stays far below the tolerance.
  const float eps = 1e-2f;
  int checked = 0;
  for (Parameter* p : model.parameter_list()) {
    std::vector<float> analytic = p->grad.to_float_vector();
    float* v = p->value.data_as<float>();
    for (int64_t i = 0; i < p->value.numel(); i += 3) {
      const float saved = v[i];
      v[i] = saved + eps;
      const double up = loss_of(model, b);
      v[i] = saved - eps;
      const double down = loss_of(model, b);
      v[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

TEST(MlpTest, GradReadyCalledOncePerParameterInReverseRegistrationOrder) {
  Mlp model({4, {3, 3}, 2, 1});
  Batch b = random_batch(2, 4, 2, 1);
  model.forward(b.x.data(), 2);
  std::vector<size_t> order;
  model.backward(b.y.data(), [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(model.parameter_list()[0]->name, "fc0.weight");
  EXPECT_EQ(model.parameter_list()[5]->name, "fc2.bias");
}

TEST(MlpTest, GradientIsFinalWhenReadyIsCalled) {
  // A reducer reads the gradient inside mark_ready: it must not change later.
  Mlp model({4, {8}, 3, 2});
  Batch b = random_batch(5, 4, 3, 2);
  model.forward(b.x.data(), 5);
  std::vector<std::vector<float>> seen(model.parameter_list().size());
  model.backward(b.y.data(), [&](size_t i) {
    seen[i] = model.parameter_list()[i]->grad.to_float_vector();
  });
  for (size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], model.parameter_list()[i]->grad.to_float_vector()) << i;
}

TEST(MlpTest, BackwardAccumulatesUntilZeroGrad) {
  Mlp model({4, {5}, 3, 4});
  Batch b = random_batch(3, 4, 3, 4);
  model.forward(b.x.data(), 3);
  model.backward(b.y.data(), nullptr);
  const std::vector<float> once = model.parameter_list()[0]->grad.to_float_vector();
  model.forward(b.x.data(), 3);
  model.backward(b.y.data(), nullptr);
  const std::vector<float> twice = model.parameter_list()[0]->grad.to_float_vector();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
  model.zero_grad();
  model.forward(b.x.data(), 3);
  model.backward(b.y.data(), nullptr);
  EXPECT_EQ(model.parameter_list()[0]->grad.to_float_vector(), once);
}

TEST(MlpTest, InitMatchesTorchLinearBounds) {
  Mlp model({100, {50}, 10, 7});
  const float bound = 1.0f / std::sqrt(100.0f);
  std::vector<float> w = model.parameter_list()[0]->value.to_float_vector();
  float lo = 1, hi = -1;
  for (float v : w) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9f * bound);  // actually spread over the range
  EXPECT_GT(hi, 0.9f * bound);
  // Same seed, same weights; another seed, other weights.
  EXPECT_EQ(Mlp({100, {50}, 10, 7}).parameter_list()[0]->value.to_float_vector(), w);
  EXPECT_NE(Mlp({100, {50}, 10, 8}).parameter_list()[0]->value.to_float_vector(), w);
}

TEST(MlpTest, DefaultModelHasSeveralMillionParameters) {
  Mlp model(MlpConfig{});
  EXPECT_EQ(model.num_parameters(), 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10);
}

TEST(SgdTest, OneStepWithMomentumAndWeightDecayMatchesHandComputation) {
  Parameter p{"p", Tensor::from_vector<float>({1.0f, -2.0f}),
              Tensor::from_vector<float>({0.5f, 0.25f})};
  Sgd sgd({&p}, {/*lr=*/0.1f, /*momentum=*/0.9f, /*dampening=*/0.0f,
                 /*weight_decay=*/0.01f, /*nesterov=*/false});
  sgd.step();
  // g = grad + wd * p = {0.51, 0.23}; buf = g; p -= lr * buf.
  EXPECT_FLOAT_EQ(p.value.item(0), 1.0f - 0.1f * 0.51f);
  EXPECT_FLOAT_EQ(p.value.item(1), -2.0f - 0.1f * 0.23f);
  // Second step: buf = 0.9 * buf + g.
  const float p0 = 1.0f - 0.1f * 0.51f;
  const float g0 = 0.5f + 0.01f * p0;
  sgd.step();
  EXPECT_NEAR(p.value.item(0), p0 - 0.1f * (0.9f * 0.51f + g0), 1e-6);
  EXPECT_EQ(sgd.steps_taken(), 2);
}

TEST(SgdTest, NesterovAndDampeningFollowTorch) {
  Parameter p{"p", Tensor::from_vector<float>({1.0f}), Tensor::from_vector<float>({1.0f})};
  Sgd sgd({&p}, {0.5f, 0.5f, 0.5f, 0.0f, true});
  sgd.step();  // buf = 1; g = 1 + 0.5 * 1 = 1.5; p = 1 - 0.75
  EXPECT_FLOAT_EQ(p.value.item(0), 0.25f);
  sgd.step();  // buf = 0.5 * 1 + 0.5 * 1 = 1; g = 1 + 0.5 = 1.5; p = 0.25 - 0.75
  EXPECT_FLOAT_EQ(p.value.item(0), -0.5f);
}

TEST(SgdTest, SavedStateResumesExactly) {
  auto make = [] {
    return Parameter{"p", Tensor::from_vector<float>({1.0f, 2.0f}),
                     Tensor::from_vector<float>({0.3f, -0.7f})};
  };
  Parameter a = make();
  Sgd sa({&a}, {0.1f, 0.9f, 0.0f, 0.0f, false});
  sa.step();
  std::stringstream state;
  ASSERT_TRUE(sa.save_state(state).ok());
  sa.step();
  // c holds the parameters as they were after the first step.
  Parameter c = make();
  ASSERT_TRUE(c.value.copy_from(Tensor::from_vector<float>(
      {1.0f - 0.1f * 0.3f, 2.0f + 0.1f * 0.7f})).ok());
  Sgd sc({&c}, {0.1f, 0.9f, 0.0f, 0.0f, false});
  ASSERT_TRUE(sc.load_state(state).ok());
  EXPECT_EQ(sc.steps_taken(), 1);
  sc.step();
  EXPECT_EQ(c.value.to_float_vector(), a.value.to_float_vector());
}

TEST(SgdTest, LoadRejectsStateOfAnotherModel) {
  Parameter a{"a", Tensor::from_vector<float>({1}), Tensor::from_vector<float>({1})};
  Sgd sa({&a}, {0.1f, 0.9f});
  sa.step();
  std::stringstream state;
  ASSERT_TRUE(sa.save_state(state).ok());
  Sgd sb({&a, &a}, {0.1f, 0.9f});
  absl::Status s = sb.load_state(state);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 parameters"), std::string::npos) << s;
}

TEST(MlpTest, SaveLoadRoundTripsAndChecksShapes) {
  Mlp a({6, {5}, 3, 1}), b({6, {5}, 3, 2}), c({6, {4}, 3, 1});
  std::stringstream ckpt;
  ASSERT_TRUE(a.save(ckpt).ok());
  std::string bytes = ckpt.str();
  std::stringstream in1(bytes);
  ASSERT_TRUE(b.load(in1).ok());
  for (size_t i = 0; i < a.parameter_list().size(); ++i)
    EXPECT_EQ(a.parameter_list()[i]->value.to_float_vector(),
              b.parameter_list()[i]->value.to_float_vector());
  std::stringstream in2(bytes);
  absl::Status s = c.load(in2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fc0.weight"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[5, 6]"), std::string::npos) << s;
}

TEST(MlpTest, TrainingLowersLossAndLearnsSeparableProblem) {
  // Class = index of the largest of the first 3 inputs: learnable, not linear
  // in a trivial way.
  const int64_t n = 256, inputs = 6, classes = 3;
  Batch b = random_batch(n, inputs, classes, 5);
  for (int64_t r = 0; r < n; ++r) {
    const float* x = &b.x[r * inputs];
    b.y[r] = static_cast<int32_t>(std::max_element(x, x + 3) - x);
  }
  Mlp model({inputs, {32}, classes, 9});
  Sgd sgd(model.parameter_list(), {0.2f, 0.9f, 0.0f, 1e-4f, false});
  const double initial = loss_of(model, b);
  for (int step = 0; step < 300; ++step) {
    model.zero_grad();
    model.forward(b.x.data(), n);
    model.backward(b.y.data(), nullptr);
    sgd.step();
  }
  const double final_loss = loss_of(model, b);
  EXPECT_LT(final_loss, 0.25 * initial);
  Mlp::Evaluation eval = model.evaluate(b.x.data(), b.y.data(), n, 64);
  EXPECT_GT(eval.correct, n * 9 / 10);
}

}  // namespace
}  // namespace ddpx::nn
