// The communication hook interface (PyTorch's "DDP Communication Hooks",
// https://pytorch.org/docs/stable/ddp_comm_hooks.html): DDP hands each full
// bucket to a hook, which returns a future of the bucket's averaged gradients.
//
// In torch a hook is a function plus a `state` object; here the state lives
// in the hook object, and FunctionHook adapts a plain function.
#ifndef DDPX_HOOKS_COMM_HOOK_H_
#define DDPX_HOOKS_COMM_HOOK_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "hooks/grad_bucket.h"
#include "core/future.h"
#include "core/tensor.h"

namespace ddpx {

class CommHook {
 public:
  virtual ~CommHook() = default;
  // "allreduce", "fp16", "powersgd", ...
  virtual std::string name() const = 0;
  // Launches communication for `bucket` and returns at once. The future's
  // value is a tensor with the buffer's dtype and numel holding the gradients
  // averaged over ranks; DDP copies it back into the parameters' gradients.
  virtual std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) = 0;
  // Whether run() may issue collectives after it has returned, from its
  // futures' callbacks on communication threads (PowerSGD allreduces Q once
  // P's allreduce is done; int8 allgathers after its alltoall). Such
  // collectives would interleave differently on different ranks if the next
  // bucket's hook were already running, so the reducer then launches bucket
  // k+1 only after bucket k's future has completed. Hooks that issue every
  // collective inside run() say false and get full overlap. An unknown hook
  // is assumed to.
  virtual bool issues_collectives_after_run() const { return true; }
  // Hook state (PowerSGD's error feedback, warm-start Qs, iteration), so a
  // resumed run continues as if it had not stopped. Stateless hooks write
  // nothing.
  virtual absl::Status save_state(std::ostream& out) const { return absl::OkStatus(); }
  virtual absl::Status load_state(std::istream& in) { return absl::OkStatus(); }
  // The state's iteration counter (PowerSGD's state.iter: the steps it has
  // seen), so a checkpoint can check it against the training step; -1 for a
  // hook that keeps none.
  virtual int64_t state_iteration() const { return -1; }
  // Forgets the part of the state that stems from this rank's own
  // gradients (PowerSGD's error feedback), keeping what every rank holds
  // alike (PowerSGD's iteration, warm-start P/Q, generator): for a process
  // that loaded another rank's state to take a place of its own (an
  // elastic job's newcomer, docs/elastic.md).
  virtual void drop_local_state() {}
};

using CommHookFn = std::function<std::shared_ptr<Future<Tensor>>(GradBucket&)>;

class FunctionHook : public CommHook {
 public:
  FunctionHook(std::string name, CommHookFn fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override { return fn_(bucket); }

 private:
  std::string name_;
  CommHookFn fn_;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_COMM_HOOK_H_
