// ddpx::torch::DistributedDataParallel trains like torch's own DDP on a model
// with tied, unused and sometimes-used parameters: the test runs
// tests/reference/torch_ddp_lstm.py (torch DDP, gloo, 2 processes), trains
// the same LSTM language model from the same weights and data with ddpx on
// 2 ranks, and compares the final weights. find_unused_parameters, SGD with
// momentum and weight decay, 20 steps; both ways C++ ties a weight (the same
// tensor registered under two names, or registered once and used twice),
// copy and bucket-view gradients, and zero_grad to none or to zeros.
//
// Needs python3 (or $PYTHON) with torch, as tools/setup installs it; fails,
// never skips, without it.
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "reducer/torch/distributed_data_parallel.h"
#include "tests/torch/torch_test_util.h"

namespace {

namespace F = ::torch::nn::functional;

// torch_ddp_lstm.py's settings (checked against the script's lstm.txt).
constexpr int64_t kVocab = 12;
constexpr int64_t kWidth = 6;
constexpr int64_t kBatch = 3;
constexpr int64_t kSeq = 5;
constexpr int kSteps = 20;
constexpr double kLr = 0.1;
constexpr double kMomentum = 0.9;
constexpr double kWeightDecay = 0.01;

enum class Tying {
  kRegisteredTwice,  // the decoder registers the embedding's tensor as its own "weight"
  kUsedTwice,        // registered once; forward uses it in the embedding and the decoder
};

// The decoder's bias, and with kRegisteredTwice the tied weight.
class DecoderImpl : public ::torch::nn::Module {
 public:
  explicit DecoderImpl(const at::Tensor& tied_weight) {
    if (tied_weight.defined()) weight = register_parameter("weight", tied_weight);
    bias = register_parameter("bias", at::zeros({kVocab}));
  }
  at::Tensor weight, bias;
};
TORCH_MODULE(Decoder);

// torch_ddp_lstm.py's LstmLm, module for module (so named_parameters, less
// the tied duplicate, lists the same names in the same order).
class LstmLmImpl : public ::torch::nn::Module {
 public:
  explicit LstmLmImpl(Tying tying) : tying_(tying) {
    embedding = register_module("embedding", ::torch::nn::Embedding(kVocab, kWidth));
    lstm = register_module(
        "lstm", ::torch::nn::LSTM(::torch::nn::LSTMOptions(kWidth, kWidth).batch_first(true)));
    odd = register_module("odd", ::torch::nn::Linear(kWidth, kWidth));
    one_rank = register_module("one_rank", ::torch::nn::Linear(kWidth, kWidth));
    never = register_module("never", ::torch::nn::Linear(kWidth, kWidth));
    decoder = register_module(
        "decoder", Decoder(tying == Tying::kRegisteredTwice ? embedding->weight : at::Tensor()));
  }
  at::Tensor forward(const at::Tensor& tokens, int step, int rank) {
    at::Tensor h = std::get<0>(lstm->forward(embedding->forward(tokens)));
    if (step % 2 == 1) h = h + at::tanh(odd->forward(h));
    if (rank == 1) h = h + at::tanh(one_rank->forward(h));
    const at::Tensor& w = tying_ == Tying::kRegisteredTwice ? decoder->weight : embedding->weight;
    return F::linear(h, w, decoder->bias);
  }
  ::torch::nn::Embedding embedding{nullptr};
  ::torch::nn::LSTM lstm{nullptr};
  ::torch::nn::Linear odd{nullptr}, one_rank{nullptr}, never{nullptr};
  Decoder decoder{nullptr};

 private:
  Tying tying_;
};
TORCH_MODULE(LstmLm);

}  // namespace

namespace ddpx {
namespace {

using torch::DDPOptions;
using torch::DistributedDataParallel;
using torch_testing::init_value;
using torch_testing::run_ranks;

// The module's parameters, each tensor once (the first name it has), as
// Python's named_parameters() lists them.
std::vector<std::pair<std::string, at::Tensor>> unique_parameters(::torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::set<c10::TensorImpl*> seen;
  for (const auto& item : m.named_parameters()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) {
      out.emplace_back(item.key(), item.value());
    }
  }
  return out;
}

LstmLm make_model(Tying tying) {
  LstmLm model(tying);
  ::torch::NoGradGuard no_grad;
  int64_t k = 0;
  for (auto& [name, p] : unique_parameters(*model)) {
    at::Tensor v = at::empty({p.numel()}, at::kDouble);
    for (int64_t i = 0; i < p.numel(); ++i) {
      v.data_ptr<double>()[i] = init_value(k, i, name, p.sizes().vec());
    }
    p.copy_(v.to(at::kFloat).view(p.sizes()));
    ++k;
  }
  return model;
}

std::pair<at::Tensor, at::Tensor> lstm_batch(int step, int rank) {
  at::Tensor tokens = at::empty({kBatch, kSeq}, at::kLong);
  at::Tensor targets = at::empty({kBatch, kSeq}, at::kLong);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t s = 0; s < kSeq; ++s) {
      tokens.data_ptr<int64_t>()[b * kSeq + s] = (b * 5 + s * 3 + step * 7 + rank * 11) % kVocab;
      targets.data_ptr<int64_t>()[b * kSeq + s] = (b * 3 + s * 5 + step * 2 + rank * 7 + 1) % kVocab;
    }
  }
  return {tokens, targets};
}

struct Reference {
  std::map<std::string, double> settings;
  std::vector<std::string> names;
  std::map<std::string, std::vector<float>> finals;  // by zero_grad mode
};

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= uint32_t{static_cast<unsigned char>(bytes[4 * i + b])} << (8 * b);
    memcpy(&v[i], &u, 4);
  }
  return v;
}

// Runs torch's DDP through the script; empty names on failure (reported).
Reference run_torch_reference() {
  Reference ref;
  const std::string out =
      torch_testing::run_torch_script("tests/reference/torch_ddp_lstm.py", "torch_ddp_lstm");
  if (out.empty()) return ref;
  std::ifstream in(out + "/lstm.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "param") {
      std::string name;
      ls >> name;
      ref.names.push_back(name);
    } else {
      ls >> ref.settings[key];
    }
  }
  for (const char* mode : {"none", "zero"}) ref.finals[mode] = read_f32(out + "/lstm_" + mode + ".f32");
  return ref;
}

const Reference& reference() {
  static const Reference* ref = new Reference(run_torch_reference());
  return *ref;
}

TEST(TorchDdpLstmParity, ReferenceSettingsMatch) {
  const Reference& ref = reference();
  ASSERT_FALSE(ref.names.empty());
  std::map<std::string, double> want = {
      {"vocab", kVocab}, {"width", kWidth}, {"batch", kBatch}, {"seq", kSeq},
      {"steps", kSteps}, {"lr", kLr}, {"momentum", kMomentum}, {"weight_decay", kWeightDecay}};
  EXPECT_EQ(ref.settings, want);
}

struct Variant {
  Tying tying;
  bool bucket_view;
  bool set_to_none;
};

std::string describe(const Variant& v) {
  return std::string(v.tying == Tying::kRegisteredTwice ? "registered twice" : "used twice") +
         (v.bucket_view ? ", bucket views" : ", copies") +
         (v.set_to_none ? ", zero_grad to none" : ", zero_grad to zeros");
}

class TorchDdpLstmParity : public ::testing::TestWithParam<Variant> {};

TEST_P(TorchDdpLstmParity, FinalWeightsEqualTorchDdp) {
  const Variant v = GetParam();
  const Reference& ref = reference();
  ASSERT_FALSE(ref.names.empty()) << "no reference from torch";
  const std::vector<float>& want = ref.finals.at(v.set_to_none ? "none" : "zero");
  std::vector<std::vector<float>> finals(2);
  std::vector<std::vector<std::string>> names(2);
  std::vector<int> never_grad_defined(2, 1);  // not vector<bool>: one word, two writers
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    const int rank = pg->rank();
    LstmLm model = make_model(v.tying);
    DDPOptions o;
    o.find_unused_parameters = true;
    o.gradient_as_bucket_view = v.bucket_view;
    auto ddp = DistributedDataParallel::create(model, pg, o);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    names[rank] = (*ddp)->parameter_names();
    std::vector<at::Tensor> params;
    for (auto& [name, p] : unique_parameters(*model)) params.push_back(p);
    ::torch::optim::SGD opt(params, ::torch::optim::SGDOptions(kLr)
                                        .momentum(kMomentum)
                                        .weight_decay(kWeightDecay));
    for (int step = 0; step < kSteps; ++step) {
      opt.zero_grad(v.set_to_none);
      auto [tokens, targets] = lstm_batch(step, rank);
      at::Tensor logits = model->forward(tokens, step, rank);
      F::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1})).backward();
      opt.step();
    }
    never_grad_defined[rank] = model->never->weight.grad().defined();
    for (auto& [name, p] : unique_parameters(*model)) {
      at::Tensor c = p.detach().contiguous();
      finals[rank].insert(finals[rank].end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
  });
  // Python's DDP sees the tied weight once, under its first name.
  EXPECT_EQ(names[0], ref.names) << describe(v);
  // No rank ever used `never`: its gradient stays undefined, as in torch.
  EXPECT_FALSE(never_grad_defined[0]) << describe(v);
  EXPECT_EQ(finals[1], finals[0]) << describe(v) << ": ranks differ";
  ASSERT_EQ(finals[0].size(), want.size()) << describe(v);
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(finals[0][i]) - want[i]);
    if (d > worst) worst = d, worst_at = i;
  }
  std::printf("%s: largest difference from torch's DDP %g\n", describe(v).c_str(), worst);
  // The same kernels on one thread each side: equal up to float noise.
  EXPECT_LE(worst, 1e-6) << describe(v) << ": largest difference from torch's DDP at element "
                         << worst_at << " (" << finals[0][worst_at] << " vs " << want[worst_at]
                         << ")";
}

INSTANTIATE_TEST_SUITE_P(
    TiedUnusedSometimesUsed, TorchDdpLstmParity,
    ::testing::Values(Variant{Tying::kRegisteredTwice, false, true},
                      Variant{Tying::kRegisteredTwice, false, false},
                      Variant{Tying::kUsedTwice, false, true},
                      Variant{Tying::kUsedTwice, false, false},
                      Variant{Tying::kRegisteredTwice, true, true},
                      Variant{Tying::kRegisteredTwice, true, false},
                      Variant{Tying::kUsedTwice, true, true},
                      Variant{Tying::kUsedTwice, true, false}));

}  // namespace
}  // namespace ddpx
