#include "examples/trainer/ddp_sync.h"

namespace ddpx::trainer {
namespace {

class DdpSync : public GradientSync {
 public:
  DdpSync(std::unique_ptr<DistributedDataParallel> ddp, std::string hook_name)
      : ddp_(std::move(ddp)), hook_name_(std::move(hook_name)) {}

  std::string describe() const override { return "DDP with hook " + hook_name_; }

  absl::Status prepare() override {
    error_ = absl::OkStatus();
    return ddp_->prepare_for_backward();
  }

  void mark_ready(size_t i) override {
    // Backward cannot stop halfway; the first error is returned by finish().
    absl::Status s = ddp_->mark_ready(i);
    if (error_.ok() && !s.ok()) error_ = s;
  }

  absl::Status finish() override {
    if (!error_.ok()) return error_;
    return ddp_->finalize_backward();
  }

  SyncStats last_stats() const override {
    const ReducerStats& r = ddp_->stats();
    SyncStats s;
    s.gradient_bytes = r.gradient_bytes;
    s.bytes_communicated = r.bytes_communicated;
    s.compression_ratio = r.compression_ratio;
    s.comm_wait_seconds = r.comm_wait_seconds;
    s.num_buckets = r.num_buckets;
    return s;
  }

  absl::Status save_state(std::ostream& out) const override {
    return ddp_->save_hook_state(out);
  }
  absl::Status load_state(std::istream& in) override { return ddp_->load_hook_state(in); }

 private:
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::string hook_name_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> make_ddp_sync(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg,
    const DDPOptions& options, std::unique_ptr<CommHook> hook) {
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::create(params, std::move(pg), options);
  if (!ddp.ok()) return ddp.status();
  std::string name = "allreduce (DDP built-in)";
  if (hook != nullptr) {
    name = hook->name();
    absl::Status s = (*ddp)->register_comm_hook(std::move(hook));
    if (!s.ok()) return s;
  }
  return std::unique_ptr<GradientSync>(new DdpSync(std::move(*ddp), name));
}

}  // namespace ddpx::trainer
