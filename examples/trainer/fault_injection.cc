#include "examples/trainer/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "elastic/kill_point.h"

namespace ddpx::trainer {
namespace {

class FaultInjectingHook : public CommHook {
 public:
  FaultInjectingHook(std::unique_ptr<CommHook> inner, InjectedFault fault,
                     std::shared_ptr<ProcessGroup> pg)
      : inner_(std::move(inner)), fault_(std::move(fault)), pg_(std::move(pg)) {}

  std::string name() const override { return inner_->name(); }
  bool issues_collectives_after_run() const override {
    return inner_->issues_collectives_after_run();
  }
  absl::Status save_state(std::ostream& out) const override { return inner_->save_state(out); }
  absl::Status load_state(std::istream& in) override { return inner_->load_state(in); }
  int64_t state_iteration() const override { return inner_->state_iteration(); }
  void drop_local_state() override { inner_->drop_local_state(); }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    if (bucket.index() == 0) ++step_;
    if (fault_.kind == "kill_points") {
      // Every bucket, every step: before the bucket's collective is issued,
      // while it is in flight, and once it completed here.
      const int rank = pg_->rank();
      elastic::kill_point("hook/run", rank);
      std::shared_ptr<Future<Tensor>> f = inner_->run(bucket);
      elastic::kill_point("hook/issued", rank);
      return f->then([rank](Tensor& t) {
        elastic::kill_point("hook/done", rank);
        return t;
      });
    }
    if (bucket.index() != 0 || step_ != fault_.step) return inner_->run(bucket);
    const bool me = pg_->rank() == fault_.rank;
    if (fault_.kind == "wrong_root") {
      BroadcastOptions o;
      o.root_rank = me ? 1 : 0;
      if (me) announce("broadcasts from root 1 where the others use root 0");
      absl::Status s = pg_->broadcast({Tensor::zeros({4}, DType::kFloat32)}, o)->wait();
      if (!s.ok()) return Future<Tensor>::failed(s);
      return inner_->run(bucket);
    }
    if (!me) return inner_->run(bucket);
    if (fault_.kind == "sigstop") {
      announce("stops itself (SIGSTOP)");
      raise(SIGSTOP);
    } else if (fault_.kind == "sigkill") {
      announce("kills itself (SIGKILL)");
      raise(SIGKILL);
    } else if (fault_.kind == "skip_allreduce") {
      announce("skips its bucket allreduce");
      return Future<Tensor>::ready(bucket.buffer());
    } else if (fault_.kind == "wrong_count") {
      announce("allreduces one element more than its bucket");
      Tensor buffer = bucket.buffer();
      Tensor bigger = Tensor::zeros({buffer.numel() + 1}, buffer.dtype());
      return pg_->allreduce({bigger})->get_future()->then(
          [buffer](TensorList&) -> Tensor { return buffer; });
    }
    return inner_->run(bucket);
  }

 private:
  void announce(const char* what) const {
    fprintf(stderr, "train: FAULT INJECTION: rank %d %s at step %lld (pid %d)\n", pg_->rank(),
            what, static_cast<long long>(step_), getpid());
    fflush(stderr);
  }

  std::unique_ptr<CommHook> inner_;
  const InjectedFault fault_;
  std::shared_ptr<ProcessGroup> pg_;
  int64_t step_ = -1;
};

}  // namespace

absl::Status check_fault_kind(const std::string& kind) {
  for (const char* k :
       {"", "skip_allreduce", "wrong_count", "wrong_root", "sigstop", "sigkill", "kill_points"}) {
    if (kind == k) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--inject_fault=", kind,
      ": expected skip_allreduce, wrong_count, wrong_root, sigstop, sigkill or kill_points"));
}

std::unique_ptr<CommHook> inject_fault(std::unique_ptr<CommHook> inner, InjectedFault fault,
                                       std::shared_ptr<ProcessGroup> pg) {
  return std::make_unique<FaultInjectingHook>(std::move(inner), std::move(fault), std::move(pg));
}

}  // namespace ddpx::trainer
