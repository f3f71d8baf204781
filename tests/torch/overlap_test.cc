// Communication overlaps backward: ddpx::torch::DistributedDataParallel
// issues a bucket's collective from the autograd hook of the bucket's last
// gradient, while backward is still computing the gradients of the layers
// below, not after backward() is done.
//
// The witness is the flight recorder (process_group/tracing/flight_recorder.h),
// which records every collective the moment the front end admits it, with
// the DDP bucket and step that issued it. A tensor hook on each layer's
// output runs when backward reaches that layer (its output's gradient is in,
// its own parameters' gradients are not yet computed) and reads which of
// this rank's buckets have been issued so far. Reading the record from
// inside backward orders the events causally, with no clocks to compare.
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/tracing/flight_recorder.h"
#include "reducer/torch/distributed_data_parallel.h"
#include "tests/torch/torch_test_util.h"

namespace {

constexpr int kLayers = 4;
constexpr int64_t kWidth = 32;

// kLayers Linear(kWidth, kWidth) layers, each followed by a ReLU. Outside
// namespace ddpx, where TORCH_MODULE's unqualified torch:: would find
// ddpx::torch.
class ChainImpl : public ::torch::nn::Module {
 public:
  ChainImpl() {
    for (int k = 0; k < kLayers; ++k) {
      layers.push_back(
          register_module("fc" + std::to_string(k), ::torch::nn::Linear(kWidth, kWidth)));
    }
  }
  std::vector<::torch::nn::Linear> layers;
};
TORCH_MODULE(Chain);

}  // namespace

namespace ddpx {
namespace {

// The DDP buckets for which `pg` (this rank) has issued a collective in
// synchronized step `step`, as the flight recorder saw them admitted.
std::set<int64_t> buckets_issued(const ProcessGroup& pg, int64_t step) {
  std::set<int64_t> out;
  const int32_t group = pg.trace_group().index();
  for (const TraceEntry& e : FlightRecorder::get().snapshot().entries) {
    if (e.group == group && e.site_step == step && e.site_bucket >= 0) out.insert(e.site_bucket);
  }
  return out;
}

struct OverlapCase {
  bool bucket_view;
};

class TorchDdpOverlap : public ::testing::TestWithParam<OverlapCase> {};

TEST_P(TorchDdpOverlap, BucketsAreIssuedWhileBackwardComputesTheLayersBelow) {
  constexpr int kSteps = 3;  // before the bucket rebuild, at it, after it
  torch_testing::run_ranks(2, [&](std::shared_ptr<ProcessGroup> pg) {
    const int rank = pg->rank();
    Chain model;
    torch::DDPOptions o;
    o.gradient_as_bucket_view = GetParam().bucket_view;
    // One layer per bucket: a bucket closes once it holds a weight (reverse
    // registration order puts each layer's bias, then its weight, in it).
    o.first_bucket_cap_mb = o.bucket_cap_mb = (kWidth * kWidth * 4) / double(1 << 20);
    auto ddp = torch::DistributedDataParallel::create(model, pg, o);
    ASSERT_TRUE(ddp.ok()) << ddp.status();

    // bucket_of[k]: the bucket holding layer k's parameters.
    auto buckets_of_layers = [&] {
      std::map<int, int64_t> bucket_of;
      const std::vector<std::vector<std::string>> buckets = (*ddp)->bucket_assignment();
      EXPECT_EQ(buckets.size(), static_cast<size_t>(kLayers));
      for (size_t b = 0; b < buckets.size(); ++b) {
        EXPECT_EQ(buckets[b].size(), 2u) << "bucket " << b;
        for (const std::string& name : buckets[b]) bucket_of[std::stoi(name.substr(2))] = b;
      }
      EXPECT_EQ(bucket_of.size(), static_cast<size_t>(kLayers));
      return bucket_of;
    };

    for (int step = 0; step < kSteps; ++step) {
      const std::map<int, int64_t> bucket_of = buckets_of_layers();
      // issued_when_reached[k]: the buckets issued when backward reached
      // layer k (layers 0 .. kLayers-2; the last layer's output is the loss's
      // input, which backward starts from).
      std::vector<std::set<int64_t>> issued_when_reached(kLayers - 1);
      std::vector<bool> reached(kLayers - 1, false);
      at::Tensor x = at::arange(8 * kWidth, at::kFloat).reshape({8, kWidth}).mul(0.1 + step + rank).sin();
      for (int k = 0; k < kLayers; ++k) {
        x = ::torch::nn::functional::relu(model->layers[k](x));
        if (k + 1 < kLayers) {
          x.register_hook([&, k, step](const at::Tensor&) {
            issued_when_reached[k] = buckets_issued(*pg, step);
            reached[k] = true;
          });
        }
      }
      model->zero_grad(/*set_to_none=*/!o.gradient_as_bucket_view);
      x.pow(2).sum().backward();

      ASSERT_EQ((*ddp)->stats().step, static_cast<uint64_t>(step + 1));
      EXPECT_EQ(buckets_issued(*pg, step).size(), static_cast<size_t>(kLayers))
          << "rank " << rank << " step " << step << ": not every bucket was recorded";
      for (int k = 0; k + 1 < kLayers; ++k) {
        ASSERT_TRUE(reached[k]) << "the hook on layer " << k << "'s output did not run";
        const std::set<int64_t>& issued = issued_when_reached[k];
        // Layer k's gradients do not exist yet, so neither does its bucket's
        // collective: the hook really ran inside backward.
        EXPECT_EQ(issued.count(bucket_of.at(k)), 0u)
            << "rank " << rank << " step " << step << ": layer " << k << "'s bucket issued "
            << "before its gradients were computed";
        // Every layer above is done: its bucket is already on the wire.
        for (int above = k + 1; above < kLayers; ++above) {
          EXPECT_EQ(issued.count(bucket_of.at(above)), 1u)
              << "rank " << rank << " step " << step << ": when backward reached layer " << k
              << ", layer " << above << "'s bucket " << bucket_of.at(above)
              << " had not been issued (communication waits for the end of backward)";
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, TorchDdpOverlap,
                         ::testing::Values(OverlapCase{false}, OverlapCase{true}),
                         [](const ::testing::TestParamInfo<OverlapCase>& info) {
                           return info.param.bucket_view ? "BucketView" : "Copies";
                         });

}  // namespace
}  // namespace ddpx
