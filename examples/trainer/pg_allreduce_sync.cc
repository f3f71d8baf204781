#include "examples/trainer/pg_allreduce_sync.h"

#include <chrono>
#include <vector>

namespace ddpx::trainer {
namespace {

class PerParameterAllreduce : public GradientSync {
 public:
  PerParameterAllreduce(nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg)
      : params_(params), pg_(std::move(pg)) {}

  std::string describe() const override { return "per-parameter allreduce (no DDP)"; }

  absl::Status prepare() override {
    works_.clear();
    bytes_before_ = pg_->counters().payload_bytes.load();
    return absl::OkStatus();
  }

  void mark_ready(size_t i) override {
    AllreduceOptions opts;
    opts.op = ReduceOp::AVG;
    works_.push_back(pg_->allreduce({params_.parameter(i).grad}, opts));
  }

  absl::Status finish() override {
    const auto start = std::chrono::steady_clock::now();
    for (auto& work : works_) {
      absl::Status s = work->wait();
      if (!s.ok()) return s;
    }
    stats_ = {};
    stats_.comm_wait_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < params_.num_parameters(); ++i)
      stats_.gradient_bytes += params_.parameter(i).grad.nbytes();
    stats_.bytes_communicated = pg_->counters().payload_bytes.load() - bytes_before_;
    stats_.num_buckets = works_.size();
    if (stats_.bytes_communicated > 0)
      stats_.compression_ratio = double(stats_.gradient_bytes) / stats_.bytes_communicated;
    works_.clear();
    return absl::OkStatus();
  }

  SyncStats last_stats() const override { return stats_; }
  absl::Status save_state(std::ostream&) const override { return absl::OkStatus(); }
  absl::Status load_state(std::istream&) override { return absl::OkStatus(); }

 private:
  nn::ParameterStore& params_;
  std::shared_ptr<ProcessGroup> pg_;
  std::vector<std::shared_ptr<Work>> works_;
  uint64_t bytes_before_ = 0;
  SyncStats stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> make_per_parameter_allreduce(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg) {
  TensorList values;
  for (size_t i = 0; i < params.num_parameters(); ++i) values.push_back(params.parameter(i).value);
  for (const Tensor& v : values) {
    absl::Status s = pg->broadcast({v})->wait();
    if (!s.ok()) return s;
  }
  return std::unique_ptr<GradientSync>(new PerParameterAllreduce(params, std::move(pg)));
}

}  // namespace ddpx::trainer
