// ddpx::torch::DistributedDataParallel over libtorch modules, ranks as
// threads with real Gloo groups: the tests ddpx's DDP has for its own
// tensors (tests/reducer/), through autograd's hooks.
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/embedding.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "examples/torch/cnn.h"
#include "gtest/gtest.h"
#include "process_group/rendezvous/init.h"
#include "reducer/torch/distributed_data_parallel.h"
#include "tests/torch/torch_test_util.h"

namespace {

namespace F = ::torch::nn::functional;

// fc1 -> relu -> fc2 (+ extra, when used). Outside namespace ddpx, where
// TORCH_MODULE's unqualified torch:: would find ddpx::torch.
class TinyNetImpl : public ::torch::nn::Module {
 public:
  TinyNetImpl() {
    fc1 = register_module("fc1", ::torch::nn::Linear(6, 8));
    fc2 = register_module("fc2", ::torch::nn::Linear(8, 3));
    extra = register_module("extra", ::torch::nn::Linear(8, 3));
  }
  at::Tensor forward(const at::Tensor& x, bool use_extra = true) {
    at::Tensor h = F::relu(fc1(x));
    at::Tensor out = fc2(h);
    if (use_extra) {
      at::Tensor e = extra(h);
      out = out + e;
    }
    return out;
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, extra{nullptr};
};
TORCH_MODULE(TinyNet);

// An Embedding with sparse(true), or (functional) a parameter that forward
// gives a sparse gradient through F::embedding.
class SparseEmbeddingNetImpl : public ::torch::nn::Module {
 public:
  explicit SparseEmbeddingNetImpl(bool functional) : functional_(functional) {
    if (functional) {
      table = register_parameter("table", at::randn({10, 4}));
    } else {
      emb = register_module("emb", ::torch::nn::Embedding(
                                       ::torch::nn::EmbeddingOptions(10, 4).sparse(true)));
    }
    head = register_module("head", ::torch::nn::Linear(4, 3));
  }
  at::Tensor forward(const at::Tensor& tokens) {
    at::Tensor e = functional_
                       ? F::embedding(tokens, table, F::EmbeddingFuncOptions().sparse(true))
                       : emb(tokens);
    return head(e);
  }
  at::Tensor table;
  ::torch::nn::Embedding emb{nullptr};
  ::torch::nn::Linear head{nullptr};

 private:
  bool functional_;
};
TORCH_MODULE(SparseEmbeddingNet);

}  // namespace

namespace ddpx {
namespace {

using torch::DDPError;
using torch::DDPOptions;
using torch::DistributedDataParallel;
using torch_testing::flat_buffers;
using torch_testing::flat_grads;
using torch_testing::flat_parameters;
using torch_testing::golden_batch;
using torch_testing::init_parameters;
using torch_testing::run_ranks;
// A deterministic batch of 5 samples for (step, rank, micro-batch).
std::pair<at::Tensor, at::Tensor> tiny_batch(int step, int rank, int micro = 0) {
  at::Tensor x = at::arange(30, at::kFloat).reshape({5, 6}).mul(0.37 * (step + 1) + rank + 0.1 * micro).sin();
  at::Tensor y = at::arange(5, at::kLong).add(step + rank + micro).remainder(3);
  return {x, y};
}

TinyNet make_tiny() {
  TinyNet net;
  init_parameters(*net);
  return net;
}

void copy_parameters(::torch::nn::Module& to, ::torch::nn::Module& from) {
  ::torch::NoGradGuard no_grad;
  std::vector<at::Tensor> t = to.parameters(), f = from.parameters();
  for (size_t i = 0; i < t.size(); ++i) t[i].copy_(f[i]);
}

std::vector<float> average(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] / 2 + b[i] / 2;
  return out;
}

void expect_floats_eq(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && ++bad <= 5) {
      ADD_FAILURE() << what << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

TEST(TorchDdp, BroadcastsParametersAndBuffersFromRank0) {
  std::vector<std::vector<float>> states(3);
  run_ranks(3, [&](std::shared_ptr<ProcessGroup> pg) {
    ::torch::manual_seed(100 + pg->rank());  // a different replica per rank
    examples::ResidualCnn model(4, 8);
    {
      ::torch::NoGradGuard no_grad;
      for (at::Tensor b : model->buffers()) b.fill_(pg->rank() + 1);
    }
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    states[pg->rank()] = flat_parameters(*model);
  });
  EXPECT_EQ(states[1], states[0]);
  EXPECT_EQ(states[2], states[0]);
  EXPECT_EQ(states[0].back(), 1.0f);  // rank 0's num_batches_tracked
}

// Each rank's batches differ, so each rank's BatchNorm running statistics
// (float) would drift apart; after every synchronized step every rank holds
// rank 0's, num_batches_tracked (int64) included. Without broadcast_buffers
// they stay apart.
TEST(TorchDdp, BuffersAreRank0sAfterEveryStep) {
  for (bool broadcast : {true, false}) {
    constexpr int kSteps = 3;
    std::vector<std::vector<std::vector<float>>> buffers(2);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
      examples::ResidualCnn model(4, 8);
      init_parameters(*model);
      DDPOptions o;
      o.broadcast_buffers = broadcast;
      auto ddp = DistributedDataParallel::create(model, pg, o);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      for (int step = 0; step < kSteps; ++step) {
        if (pg->rank() == 1) {
          ::torch::NoGradGuard no_grad;
          model->bn1->num_batches_tracked.add_(step + 5);  // an int64 to bring back
        }
        auto [x, y] = golden_batch(4, 8, step, pg->rank());
        F::cross_entropy(model(x), y).backward();
        buffers[pg->rank()].push_back(flat_buffers(*model));
      }
    });
    for (int step = 0; step < kSteps; ++step) {
      if (broadcast) {
        EXPECT_EQ(buffers[1][step], buffers[0][step]) << "step " << step;
      } else {
        EXPECT_NE(buffers[1][step], buffers[0][step]) << "step " << step;
      }
    }
  }
}

TEST(TorchDdp, ParametersThatDifferBetweenRanksAreNamed) {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    examples::ResidualCnn model(pg->rank() == 0 ? 4 : 6, 8);
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_FALSE(ddp.ok());
    errors[pg->rank()] = std::string(ddp.status().message());
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("conv1.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
  }
  errors.assign(2, "");
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    TinyNet model = make_tiny();
    if (pg->rank() == 1) model->register_parameter("one_more", at::zeros({2}));
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_FALSE(ddp.ok());
    errors[pg->rank()] = std::string(ddp.status().message());
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
  }
}

// DDP's gradients are the average of what each rank computes alone (a twin
// model without DDP, at the same parameters), step after step: before and
// after the buckets are rebuilt, with copies or bucket views, with
// gradients zeroed in place or set to none.
struct AverageCase {
  bool bucket_view;
  bool set_to_none;
  std::string hook;
};

class TorchDdpAverage : public ::testing::TestWithParam<AverageCase> {};

TEST_P(TorchDdpAverage, GradientsAreTheAverageOfEachRanksOwn) {
  const AverageCase c = GetParam();
  constexpr int kSteps = 4;
  std::vector<std::vector<std::vector<float>>> ddp_grads(2), local_grads(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    const int rank = pg->rank();
    TinyNet model = make_tiny();
    TinyNet twin = make_tiny();
    DDPOptions o;
    o.gradient_as_bucket_view = c.bucket_view;
    o.hook = c.hook;
    o.first_bucket_cap_mb = 1e-4;  // two buckets: fc2/extra, then fc1
    auto ddp = DistributedDataParallel::create(model, pg, o);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = tiny_batch(step, rank);
      copy_parameters(*twin, *model);
      twin->zero_grad();
      F::cross_entropy(twin(x), y).backward();
      local_grads[rank].push_back(flat_grads(*twin));

      opt.zero_grad(c.set_to_none);
      F::cross_entropy(model(x), y).backward();
      ddp_grads[rank].push_back(flat_grads(*model));
      if (c.bucket_view) {
        // Every gradient is its bucket view.
        std::vector<at::Tensor> params = model->parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_EQ(params[i].grad().data_ptr(),
                    (*ddp)->core().model().parameter(i).grad.data())
              << (*ddp)->parameter_names()[i] << " at step " << step;
        }
      }
      opt.step();
    }
    EXPECT_EQ((*ddp)->stats().step, static_cast<uint64_t>(kSteps));
    EXPECT_EQ((*ddp)->stats().num_buckets, 2u);
  });
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> want = average(local_grads[0][step], local_grads[1][step]);
    expect_floats_eq(ddp_grads[0][step], want, "rank 0 step " + std::to_string(step));
    expect_floats_eq(ddp_grads[1][step], want, "rank 1 step " + std::to_string(step));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TorchDdpAverage,
                         ::testing::Values(AverageCase{false, true, ""},
                                           AverageCase{false, false, "allreduce"},
                                           AverageCase{true, false, ""},
                                           AverageCase{true, true, "allreduce"}));

TEST(TorchDdp, NoSyncAccumulatesLocallyAndTheNextStepAveragesTheSum) {
  for (bool view : {false, true}) {
    std::vector<std::vector<float>> ddp_grads(2), local_sums(2);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
      const int rank = pg->rank();
      TinyNet model = make_tiny();
      TinyNet twin = make_tiny();
      DDPOptions o;
      o.gradient_as_bucket_view = view;
      auto ddp = DistributedDataParallel::create(model, pg, o);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      for (int micro = 0; micro < 3; ++micro) {
        auto [x, y] = tiny_batch(0, rank, micro);
        F::cross_entropy(twin(x), y).backward();
      }
      local_sums[rank] = flat_grads(*twin);
      const uint64_t sent = pg->counters().payload_bytes.load();
      {
        auto guard = (*ddp)->no_sync();
        for (int micro = 0; micro < 2; ++micro) {
          auto [x, y] = tiny_batch(0, rank, micro);
          F::cross_entropy(model(x), y).backward();
        }
      }
      EXPECT_EQ(pg->counters().payload_bytes.load(), sent) << "no_sync communicated";
      EXPECT_EQ((*ddp)->stats().step, 0u);
      auto [x, y] = tiny_batch(0, rank, 2);
      F::cross_entropy(model(x), y).backward();
      EXPECT_EQ((*ddp)->stats().step, 1u);
      ddp_grads[rank] = flat_grads(*model);
    });
    const std::vector<float> want = average(local_sums[0], local_sums[1]);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(ddp_grads[r].size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        // Three local backward passes accumulate in another order than the
        // twin's: float tolerance.
        EXPECT_NEAR(ddp_grads[r][i], want[i], 1e-6 + 1e-5 * std::fabs(want[i]))
            << "view " << view << " rank " << r << " element " << i;
      }
    }
  }
}

TEST(TorchDdp, UnusedParametersAreReportedOrNamedInTheError) {
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    TinyNet model = make_tiny();
    DDPOptions o;
    o.find_unused_parameters = true;
    auto ddp = DistributedDataParallel::create(model, pg, o);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    auto [x, y] = tiny_batch(0, pg->rank());
    F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
    EXPECT_EQ((*ddp)->stats().unused_parameters, 2u);  // extra.weight, extra.bias
    EXPECT_FALSE(model->extra->weight.grad().defined()) << "unused everywhere: left undefined";
    F::cross_entropy(model->forward(x, /*use_extra=*/true), y).backward();
    EXPECT_EQ((*ddp)->stats().unused_parameters, 0u);
  });
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    TinyNet model = make_tiny();
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    auto [x, y] = tiny_batch(0, pg->rank());
    try {
      F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
      ADD_FAILURE() << "backward should have thrown";
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'extra.weight'"), std::string::npos) << m;
      EXPECT_NE(m.find("find_unused_parameters"), std::string::npos) << m;
    }
    // The next step, using every parameter, works.
    model->zero_grad();
    F::cross_entropy(model->forward(x), y).backward();
    EXPECT_EQ((*ddp)->stats().step, 1u);
  });
}

// torch's rule (its reducer's local_used_map): a parameter some rank used
// gets the average, this rank's share being its current local gradient; one
// no rank used keeps its .grad() as it was, undefined or not.
TEST(TorchDdp, UnusedGradientFollowsTorchsRule) {
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "bucket views" : "copies");
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
      const int rank = pg->rank();
      TinyNet model = make_tiny();
      DDPOptions o;
      o.find_unused_parameters = true;
      o.gradient_as_bucket_view = view;
      auto ddp = DistributedDataParallel::create(model, pg, o);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      // Before any backward .grad() is undefined, bucket views or not.
      EXPECT_FALSE(model->extra->weight.grad().defined());
      auto [x, y] = tiny_batch(0, rank);

      // Only rank 1 uses `extra`: rank 0's undefined grad contributes zero
      // and becomes the average.
      F::cross_entropy(model->forward(x, /*use_extra=*/rank == 1), y).backward();
      ASSERT_TRUE(model->extra->weight.grad().defined()) << "rank " << rank;
      at::Tensor avg = model->extra->weight.grad().clone();
      EXPECT_GT(avg.abs().sum().item<float>(), 0.0f);
      std::vector<float> mine(avg.data_ptr<float>(), avg.data_ptr<float>() + avg.numel());
      std::vector<float> other(mine.size());
      {
        Tensor t = Tensor::from_blob(mine.data(), {static_cast<int64_t>(mine.size())},
                                     DType::kFloat32, Device::cpu());
        ASSERT_TRUE(pg->allreduce({t})->wait().ok());  // the sum of both ranks' averages
      }
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i], 2 * avg.data_ptr<float>()[i]) << "ranks differ at " << i;
      }

      // Unused everywhere after zero_grad(set_to_none): stays undefined.
      model->zero_grad(/*set_to_none=*/true);
      F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
      EXPECT_FALSE(model->extra->weight.grad().defined()) << "rank " << rank;
      EXPECT_TRUE(model->fc1->weight.grad().defined());

      // Unused everywhere, .grad() holding a value of its own on each rank:
      // kept as it is with copies; with bucket views torch copies it into
      // the view, which the allreduce averages.
      model->extra->weight.mutable_grad() = at::full({3, 8}, 5.0f + rank);
      F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
      ASSERT_TRUE(model->extra->weight.grad().defined());
      EXPECT_EQ(model->extra->weight.grad().min().item<float>(), view ? 5.5f : 5.0f + rank);
      EXPECT_EQ(model->extra->weight.grad().max().item<float>(), view ? 5.5f : 5.0f + rank);

      // Unused in no_sync steps and in the step after: stays undefined.
      model->zero_grad(/*set_to_none=*/true);
      {
        auto guard = (*ddp)->no_sync();
        F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
        EXPECT_FALSE(model->extra->weight.grad().defined()) << "no_sync step, rank " << rank;
      }
      F::cross_entropy(model->forward(x, /*use_extra=*/false), y).backward();
      EXPECT_FALSE(model->extra->weight.grad().defined()) << "rank " << rank;
      EXPECT_EQ((*ddp)->stats().unused_parameters, 2u);
    });
  }
}

// Refused at create with the parameter's name; a sparse gradient made in
// forward some other way is a DDPError naming it.
TEST(TorchDdp, SparseGradientsAreRefusedNamingTheParameter) {
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    SparseEmbeddingNet model(/*functional=*/false);
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_FALSE(ddp.ok()) << "a module with a sparse Embedding was accepted";
    EXPECT_EQ(ddp.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ddp.status().message().find("'emb.weight'"), std::string::npos) << ddp.status();
    EXPECT_NE(ddp.status().message().find("sparse"), std::string::npos) << ddp.status();
  });
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    SparseEmbeddingNet model(/*functional=*/true);
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    at::Tensor tokens = at::arange(6, at::kLong).remainder(10);
    at::Tensor y = at::arange(6, at::kLong).remainder(3);
    try {
      F::cross_entropy(model->forward(tokens), y).backward();
      ADD_FAILURE() << "backward with a sparse gradient should have thrown";
    } catch (const DDPError& e) {
      EXPECT_NE(std::string(e.what()).find("'table'"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a DDPError: " << e.what();
    }
  });
}

TEST(TorchDdp, JoinFinishesUnevenInputsWithEqualReplicas) {
  const std::vector<int> batches = {3, 1};
  std::vector<std::vector<float>> finals(2);
  std::vector<int64_t> shadowed(2);
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    const int rank = pg->rank();
    examples::ResidualCnn model(4, 8);
    init_parameters(*model);
    auto ddp = DistributedDataParallel::create(model, pg);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.05).momentum(0.9));
    torch::Join join(**ddp);
    for (int step = 0; step < batches[rank]; ++step) {
      opt.zero_grad();
      auto [x, y] = golden_batch(4, 8, step, rank);
      F::cross_entropy(model(x), y).backward();
      opt.step();
    }
    absl::Status s = join.join();
    EXPECT_TRUE(s.ok()) << s;
    shadowed[rank] = join.shadowed_steps();
    finals[rank] = flat_parameters(*model);
  });
  EXPECT_EQ(shadowed[0], 0);
  EXPECT_EQ(shadowed[1], 2);
  EXPECT_EQ(finals[0], finals[1]) << "replicas differ after join";
}

// Training 6 steps straight, or 3, a checkpoint (model, optimizer and DDP
// state in torch archives, per rank), a fresh process's objects loading it,
// and 3 more: the same bits. PowerSGD from step 2 keeps error feedback and
// Qs per bucket, so the bucket layout is part of the DDP state.
TEST(TorchDdp, ResumeFromACheckpointContinuesBitExactly) {
  const std::string hook = "powersgd:rank=1,start_iter=2";
  // One run: fresh objects on every rank (loaded from the last run's
  // checkpoint when `resume`), steps [from, to), then a checkpoint.
  struct Run {
    int from, to;
    bool resume;
  };
  const Run kStraight{0, 6, false}, kFirstHalf{0, 3, false}, kSecondHalf{3, 6, true};
  std::vector<std::string> checkpoints(2);
  // Held around every torch archive operation. Ranks as threads of one
  // process share libtorch's TorchScript type caches, which archives fill
  // and read; TSan does not see the guards inside the uninstrumented
  // libtorch (tests/tsan_suppressions.cc), and ranks as processes would not
  // share them at all.
  std::mutex archives;
  auto run = [&](const Run& r) {
    std::vector<std::vector<float>> finals(2);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
      const int rank = pg->rank();
      examples::ResidualCnn model(4, 8);
      std::optional<::torch::serialize::InputArchive> in;  // made and dropped under the lock
      if (r.resume) {
        std::lock_guard<std::mutex> lock(archives);
        std::istringstream bytes(checkpoints[rank]);
        in.emplace();
        in->load_from(bytes);
        model->load(*in);  // before wrapping: loading swaps tensors
      } else {
        init_parameters(*model);
      }
      DDPOptions o;
      o.hook = hook;
      auto ddp = DistributedDataParallel::create(model, pg, o);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      ::torch::optim::SGD opt(model->parameters(),
                              ::torch::optim::SGDOptions(0.05).momentum(0.9));
      if (r.resume) {
        std::lock_guard<std::mutex> lock(archives);
        opt.load(*in);
        (*ddp)->load(*in);
        in.reset();
        EXPECT_EQ((*ddp)->hook_iteration(), r.from);
      }
      for (int s = r.from; s < r.to; ++s) {
        opt.zero_grad();
        auto [x, y] = golden_batch(4, 8, s, rank);
        F::cross_entropy(model(x), y).backward();
        opt.step();
      }
      {
        std::lock_guard<std::mutex> lock(archives);
        ::torch::serialize::OutputArchive out;
        model->save(out);
        opt.save(out);
        (*ddp)->save(out);
        std::ostringstream bytes;
        out.save_to(bytes);
        checkpoints[rank] = bytes.str();
      }
      finals[rank] = flat_parameters(*model);
    });
    return finals;
  };
  const std::vector<std::vector<float>> straight = run(kStraight);
  run(kFirstHalf);
  const std::vector<std::vector<float>> resumed = run(kSecondHalf);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(resumed[r].size(), straight[r].size());
    EXPECT_EQ(0, memcmp(resumed[r].data(), straight[r].data(), 4 * straight[r].size()))
        << "rank " << r << ": resumed run differs from the straight one";
  }
}

// A function whose backward runs a nested backward through `w`: w's
// gradient arrives twice in one backward pass.
struct Reenter : public ::torch::autograd::Function<Reenter> {
  static at::Tensor forward(::torch::autograd::AutogradContext* ctx, at::Tensor x, at::Tensor w) {
    ctx->saved_data["w"] = w;
    return x.clone();
  }
  static ::torch::autograd::variable_list backward(::torch::autograd::AutogradContext* ctx,
                                                   ::torch::autograd::variable_list g) {
    at::Tensor w = ctx->saved_data["w"].toTensor();
    ::torch::AutoGradMode grad_mode(true);  // backward runs with grad mode off
    (w * 2).sum().backward();
    return {g[0], at::Tensor()};
  }
};

TEST(TorchDdp, BadUseGivesAClearError) {
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    auto [x, y] = tiny_batch(0, pg->rank());
    {
      // A gradient twice in one backward pass.
      TinyNet model = make_tiny();
      auto ddp = DistributedDataParallel::create(model, pg);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      at::Tensor h = F::relu(model->fc1(x));
      h = Reenter::apply(h, model->fc2->weight);
      at::Tensor out = model->fc2(h) + model->extra(h);
      try {
        F::cross_entropy(out, y).backward();
        ADD_FAILURE() << "backward should have thrown";
      } catch (const std::exception& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("'fc2.weight'"), std::string::npos) << m;
        EXPECT_NE(m.find("twice"), std::string::npos) << m;
      }
      // The abandoned step leaves DDP usable.
      model->zero_grad();
      F::cross_entropy(model(x), y).backward();
      EXPECT_EQ((*ddp)->stats().step, 1u);
      // A second DDP on the same module is refused.
      auto again = DistributedDataParallel::create(model, pg);
      EXPECT_FALSE(again.ok());
    }
    {
      // The module changed after wrapping.
      TinyNet model = make_tiny();
      auto ddp = DistributedDataParallel::create(model, pg);
      ASSERT_TRUE(ddp.ok()) << ddp.status();
      model->register_parameter("late", at::ones({2}));
      try {
        F::cross_entropy(model(x), y).backward();
        ADD_FAILURE() << "backward should have thrown";
      } catch (const std::exception& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("changed after it was wrapped"), std::string::npos) << m;
        EXPECT_NE(m.find("it has 7 parameters, it had 6"), std::string::npos) << m;
      }
    }
    {
      // Tensors on two devices (meta stands in for a second device here).
      TinyNet model = make_tiny();
      model->register_buffer("elsewhere", at::zeros({2}, at::TensorOptions().device(at::kMeta)));
      auto ddp = DistributedDataParallel::create(model, pg);
      ASSERT_FALSE(ddp.ok());
      const std::string m(ddp.status().message());
      EXPECT_NE(m.find("buffer 'elsewhere' is on meta, the module's first tensor on cpu"),
                std::string::npos)
          << m;
    }
  });
}

// Every hook of the registry through the wrapper: ranks end bit for bit
// equal (noop excepted: it does not communicate), the stats name the hook
// and compressing hooks send less than the gradients.
TEST(TorchDdp, EveryRegistryHookRuns) {
  const std::vector<std::string> specs = {
      "allreduce", "fp16", "bf16", "noop", "int8", "int8:hierarchical=1,local_size=2",
      "powersgd:rank=1,start_iter=2",
      "batched_powersgd:rank=1,start_iter=2", "fp16+powersgd:rank=1,start_iter=2",
      "bf16+allreduce"};
  for (const std::string& spec : specs) {
    std::vector<std::vector<float>> finals(2);
    std::vector<ReducerStats> stats(2);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
      examples::ResidualCnn model(4, 8);
      init_parameters(*model);
      DDPOptions o;
      o.hook = spec;
      o.gradient_as_bucket_view = true;
      auto ddp = DistributedDataParallel::create(model, pg, o);
      ASSERT_TRUE(ddp.ok()) << spec << ": " << ddp.status();
      ::torch::optim::SGD opt(model->parameters(), ::torch::optim::SGDOptions(0.05));
      for (int s = 0; s < 4; ++s) {
        opt.zero_grad(/*set_to_none=*/false);
        auto [x, y] = golden_batch(4, 8, s, pg->rank());
        F::cross_entropy(model(x), y).backward();
        opt.step();
      }
      finals[pg->rank()] = flat_grads(*model);
      stats[pg->rank()] = (*ddp)->stats();
    });
    if (spec != "noop") {
      EXPECT_EQ(finals[0], finals[1]) << spec << ": ranks differ";
    }
    EXPECT_EQ(stats[0].step, 4u) << spec;
    EXPECT_NE(stats[0].hook.find(spec.substr(0, spec.find_first_of(":+"))), std::string::npos)
        << spec << " vs " << stats[0].hook;
    if (spec == "allreduce") {
      EXPECT_EQ(stats[0].bytes_communicated, stats[0].gradient_bytes);
    }
    if (spec == "fp16") {
      EXPECT_EQ(stats[0].bytes_communicated * 2, stats[0].gradient_bytes);
    }
    // Hierarchical int8 talks through its node subgroups, which the DDP's
    // group does not count.
    if (spec != "allreduce" && spec != "noop" && spec.find("hierarchical") == std::string::npos) {
      EXPECT_GT(stats[0].compression_ratio, 1.0) << spec;
    }
  }
}

// A TCP port nobody listens on right now.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t n = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

// The README's three lines, as written there, on a job of one rank.
TEST(TorchDdp, ReadmeUsageWorks) {
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  TinyNet model = make_tiny();
  ::torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto pg = ddpx::init_process_group({}).value();                                      // env://: torchrun, SLURM, MASTER_ADDR/...
  auto ddp = ddpx::torch::DistributedDataParallel::create(model, pg, {.hook = "powersgd:rank=2,start_iter=10"}).value();
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = tiny_batch(step, 0);
    optimizer.zero_grad();
    F::cross_entropy(model(x), y).backward();
    optimizer.step();
  }
  EXPECT_EQ(ddp->stats().step, 3u);
  EXPECT_EQ(ddp->stats().hook, "powersgd");
  ddp.reset();
  ddpx::destroy_process_group();
}

}  // namespace
}  // namespace ddpx
