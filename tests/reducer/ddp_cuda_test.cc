// ddpx's own DistributedDataParallel over parameters on CUDA:rank with the
// nccl backend (--config=cuda; skips, saying it did not run, without a
// GPU): construction (the cross-rank parameter check and the broadcast from
// rank 0), averaged gradients step by step with the bucket rebuild, with
// copies and bucket views, and join with uneven inputs. Every control
// message of the reducer goes through NCCL, which takes CUDA tensors only.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "gtest/gtest.h"
#include "reducer/distributed_data_parallel.h"
#include "reducer/join.h"
#include "tests/cuda/gpu_skip.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

// Four parameters of 3 to 40 elements: several buckets under the caps below.
const std::vector<Shape> kShapes = {{8, 5}, {8}, {3, 8}, {3}};

// Parameter p's values on `rank`: each rank starts elsewhere.
std::vector<float> initial(size_t p, int64_t n, int rank) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>((i + 3 * p + 7 * rank) % 9);
  return v;
}

// Parameter p's gradient on `rank` at `step`: small integers, so the
// average over two ranks is exact.
std::vector<float> gradient(size_t p, int64_t n, int rank, int step) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 5 + p + 3 * rank + step) % 11) - 5;
  return v;
}

Tensor on_device(const std::vector<float>& values, const Shape& shape, int device) {
  Tensor dev = Tensor::empty(shape, DType::kFloat32, Device::cuda(device)).value();
  EXPECT_TRUE(dev.copy_from(Tensor::from_vector(values, shape)).ok());
  return dev;
}

std::vector<float> on_host(const Tensor& t) {
  Tensor host = Tensor::zeros(t.shape(), DType::kFloat32);
  EXPECT_TRUE(host.copy_from(t).ok());
  return host.to_float_vector();
}

// Registers the four parameters on cuda:rank with `rank`'s initial values.
absl::Status register_on_device(ModelParameters& model, int rank) {
  for (size_t p = 0; p < kShapes.size(); ++p) {
    const int64_t n = shape_numel(kShapes[p]);
    absl::StatusOr<size_t> index = model.register_parameter(
        "p" + std::to_string(p), on_device(initial(p, n, rank), kShapes[p], rank));
    if (!index.ok()) return index.status();
  }
  return absl::OkStatus();
}

DDPOptions several_buckets(bool view) {
  DDPOptions o;
  o.first_bucket_cap_mb = 100.0 / (1 << 20);
  o.bucket_cap_mb = 200.0 / (1 << 20);
  o.gradient_as_bucket_view = view;
  return o;
}

// One backward: every parameter's gradient written on the device (in
// reverse order, the order autograd produces them) and marked ready.
absl::Status backward(DistributedDataParallel& ddp, ModelParameters& model, int rank,
                      int step) {
  if (absl::Status s = ddp.prepare_for_backward(); !s.ok()) return s;
  for (size_t k = model.num_parameters(); k-- > 0;) {
    const Tensor& grad = model.parameter(k).grad;
    Tensor host = Tensor::from_vector(gradient(k, grad.numel(), rank, step), grad.shape());
    if (absl::Status s = grad.copy_from(host); !s.ok()) return s;
    if (absl::Status s = ddp.mark_ready(k); !s.ok()) return s;
  }
  return ddp.finalize_backward();
}

rank_threads::GroupOptions nccl_groups() {
  rank_threads::GroupOptions groups;
  groups.backend = "nccl";
  return groups;
}

TEST(DdpCuda, ParametersStartAsRank0sAndGradientsAreAveragedOverNccl) {
  DDPX_SKIP_WITHOUT_GPU();
  const int world = std::min(cuda_device_count(), 2);
  constexpr int kSteps = 3;
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "bucket views" : "copies");
    rank_threads::run_groups(
        world,
        [&](int rank, std::shared_ptr<ProcessGroup> pg) {
          ModelParameters model;
          ASSERT_TRUE(register_on_device(model, rank).ok());
          auto ddp = DistributedDataParallel::create(model, pg, several_buckets(view));
          ASSERT_TRUE(ddp.ok()) << ddp.status();
          for (size_t p = 0; p < kShapes.size(); ++p) {
            EXPECT_EQ(on_host(model.parameter(p).value), initial(p, shape_numel(kShapes[p]), 0))
                << "parameter " << p << " is not rank 0's after construction";
          }
          for (int step = 0; step < kSteps; ++step) {
            absl::Status s = backward(**ddp, model, rank, step);
            ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
            for (size_t p = 0; p < kShapes.size(); ++p) {
              const int64_t n = shape_numel(kShapes[p]);
              std::vector<float> want(n, 0.0f);
              for (int r = 0; r < world; ++r) {
                std::vector<float> g = gradient(p, n, r, step);
                for (int64_t i = 0; i < n; ++i) want[i] += g[i];
              }
              for (float& w : want) w /= static_cast<float>(world);
              EXPECT_EQ(on_host(model.parameter(p).grad), want)
                  << "step " << step << " parameter " << p;
            }
          }
          EXPECT_TRUE((*ddp)->reducer().buckets_rebuilt());
        },
        nccl_groups());
  }
}

// Rank r has 2 + r batches; join shadows the ranks still training (its
// active-rank flags and the election of the last rank go through NCCL).
TEST(DdpCuda, JoinWithUnevenInputsOverNccl) {
  DDPX_SKIP_WITHOUT_GPU();
  const int world = std::min(cuda_device_count(), 2);
  rank_threads::run_groups(
      world,
      [&](int rank, std::shared_ptr<ProcessGroup> pg) {
        ModelParameters model;
        ASSERT_TRUE(register_on_device(model, rank).ok());
        auto ddp = DistributedDataParallel::create(model, pg, several_buckets(false));
        ASSERT_TRUE(ddp.ok()) << ddp.status();
        Join join(**ddp);
        for (int step = 0; step < 2 + rank; ++step) {
          absl::Status s = backward(**ddp, model, rank, step);
          ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
        }
        absl::Status s = join.join();
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(join.shadowed_steps(), world - 1 - rank);
      },
      nccl_groups());
}

}  // namespace
}  // namespace ddpx
