#include "examples/trainer/ddp_sync.h"

#include "examples/trainer/timed_hook.h"

namespace ddpx::trainer {
namespace {

class DdpSync : public GradientSync {
 public:
  DdpSync(std::unique_ptr<DistributedDataParallel> ddp, std::string hook_name,
          TimedCommHook* timed_hook, std::shared_ptr<TimedBackend> timed_backend)
      : ddp_(std::move(ddp)),
        hook_name_(std::move(hook_name)),
        timed_hook_(timed_hook),
        timed_backend_(std::move(timed_backend)) {}

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
    absl::Status s = ddp_->finalize_backward();
    // finalize_backward waited for every bucket's future: all spans are closed.
    if (timed_hook_ != nullptr) spans_ = timed_hook_->take_spans();
    if (timed_backend_ != nullptr) collective_spans_ = timed_backend_->take_spans();
    return s;
  }

  SyncStats last_stats() const override {
    const ReducerStats& r = ddp_->stats();
    SyncStats s;
    s.gradient_bytes = r.gradient_bytes;
    s.bytes_communicated = r.bytes_communicated;
    s.compression_ratio = r.compression_ratio;
    s.comm_wait_seconds = r.comm_wait_seconds;
    s.num_buckets = r.num_buckets;
    s.comm_spans = spans_;
    s.collective_spans = collective_spans_;
    return s;
  }

  absl::Status save_state(std::ostream& out) const override {
    return ddp_->save_hook_state(out);
  }
  absl::Status load_state(std::istream& in) override { return ddp_->load_hook_state(in); }
  void drop_local_hook_state() override {
    if (timed_hook_ != nullptr) timed_hook_->drop_local_state();
  }
  int64_t hook_iteration() const override {
    return timed_hook_ != nullptr ? timed_hook_->state_iteration() : -1;
  }

 private:
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::string hook_name_;
  TimedCommHook* timed_hook_;  // owned by ddp_; null with DDP's built-in allreduce
  std::shared_ptr<TimedBackend> timed_backend_;  // null unless --comm_trace
  std::vector<CommSpan> spans_;
  std::vector<CommSpan> collective_spans_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> make_ddp_sync(
    nn::ParameterStore& params, std::shared_ptr<ProcessGroup> pg,
    const DDPOptions& options, std::unique_ptr<CommHook> hook,
    std::shared_ptr<TimedBackend> timed) {
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::create(params, std::move(pg), options);
  if (!ddp.ok()) return ddp.status();
  std::string name = "allreduce (DDP built-in)";
  std::shared_ptr<TimedBackend> timed_backend = std::move(timed);
  TimedCommHook* timed_hook = nullptr;
  if (hook != nullptr) {
    name = hook->name();
    auto wrapped = std::make_unique<TimedCommHook>(std::move(hook));
    timed_hook = wrapped.get();
    absl::Status s = (*ddp)->register_comm_hook(std::move(wrapped));
    if (!s.ok()) return s;
  }
  return std::unique_ptr<GradientSync>(new DdpSync(std::move(*ddp), name, timed_hook, std::move(timed_backend)));
}

}  // namespace ddpx::trainer
