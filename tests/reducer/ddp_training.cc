#include "tests/reducer/ddp_training.h"

namespace ddpx {
namespace reducer_test {

absl::Status ddp_train_step(RegressionModel& model, DistributedDataParallel& ddp,
                            const Batch& batch, bool apply, std::vector<size_t> ready_order,
                            const std::vector<size_t>& skip) {
  if (absl::Status s = ddp.prepare_for_backward(); !s.ok()) return s;
  absl::StatusOr<float> loss = model.forward_backward(
      batch, [&](size_t p) { return ddp.mark_ready(p); }, std::move(ready_order), skip);
  if (!loss.ok()) return loss.status();
  if (absl::Status s = ddp.finalize_backward(); !s.ok()) return s;
  if (apply) model.sgd_step(kLr);
  return absl::OkStatus();
}

std::vector<float> train_single_process(int world, int steps, int per_rank) {
  ModelParameters params;
  RegressionModel model(params, kIn, kHidden, kOut, /*seed=*/1000);  // rank 0's seed
  for (int step = 0; step < steps; ++step) {
    std::vector<Batch> parts;
    for (int r = 0; r < world; ++r) parts.push_back(rank_batch(step, r, world, per_rank));
    model.forward_backward(concat(parts), [](size_t) { return absl::OkStatus(); }).value();
    model.sgd_step(kLr);
  }
  return model.flat_values();
}

DDPOptions small_buckets() {
  DDPOptions o;
  o.first_bucket_cap_mb = 100.0 / (1 << 20);  // 100 bytes
  o.bucket_cap_mb = 300.0 / (1 << 20);
  return o;
}

std::unique_ptr<DistributedDataParallel> make_small_bucket_ddp(
    ModelParameters& params, std::shared_ptr<ProcessGroup> pg, bool bucket_view) {
  DDPOptions options = small_buckets();
  options.gradient_as_bucket_view = bucket_view;
  return DistributedDataParallel::create(params, std::move(pg), options).value();
}

}  // namespace reducer_test
}  // namespace ddpx
