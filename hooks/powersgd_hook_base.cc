#include "hooks/powersgd_hook_base.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/default_hooks.h"
#include "hooks/powersgd_step.h"

namespace ddpx {

PowerSGDHookBase::PowerSGDHookBase(std::shared_ptr<ProcessGroup> pg,
                                   std::shared_ptr<PowerSGDState> state)
    : pg_(std::move(pg)), state_(std::move(state)) {}

std::shared_ptr<Future<Tensor>> PowerSGDHookBase::run(GradBucket& bucket) {
  const Tensor& buffer = bucket.buffer();
  // A device bucket needs that device's kernels; without them (a build
  // without --config=cuda) fail before touching anything, at every step.
  if (buffer.defined()) {
    absl::StatusOr<DeviceKernels*> k = kernels_for(buffer, absl::StrCat(name(), " hook"));
    if (!k.ok()) return Future<Tensor>::failed(k.status());
  }
  const uint64_t bytes = buffer.nbytes();
  const int world = pg_ ? pg_->size() : 1;
  counter_->add_call(bytes, allreduce_wire_bytes(bytes, world));
  if (state_->compressing()) return run_compressed(bucket);
  state_->maybe_increase_iter(bucket.is_last());
  if (!pg_) return Future<Tensor>::ready(buffer);  // the average over one rank
  counter_->add_traffic(bytes, allreduce_wire_bytes(bytes, world));
  return allreduce_average(*pg_, buffer);
}

std::shared_ptr<Future<Tensor>> PowerSGDHookBase::start_step(
    const GradBucket& bucket, Tensor work, CompressionPlan plan,
    std::function<absl::StatusOr<Tensor>()> finish) {
  PowerSGDStepInput step;
  step.bucket_index = bucket.index();
  step.bucket_is_last = bucket.is_last();
  step.buffer = std::move(work);
  step.wire_dtype = bucket.buffer().dtype();
  step.plan = std::move(plan);
  step.finish = std::move(finish);
  step.counter = counter_;
  step.kernels = &kernels_of(bucket);
  return run_powersgd_step(pg_, state_, std::move(step));
}

DeviceKernels& PowerSGDHookBase::kernels_of(const GradBucket& bucket) {
  return **kernels_for(bucket.buffer(), "PowerSGD hook");  // checked in run()
}

absl::Status PowerSGDHookBase::save_state(std::ostream& out) const {
  return state_->save(out);
}

absl::Status PowerSGDHookBase::load_state(std::istream& in) {
  return state_->load(in);
}

}  // namespace ddpx
