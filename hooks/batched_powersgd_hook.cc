#include "hooks/batched_powersgd_hook.h"

#include <algorithm>

#include "hooks/powersgd_plan.h"
#include "hooks/default_hooks.h"
#include "hooks/powersgd_step.h"

namespace ddpx {

BatchedPowerSGDHook::BatchedPowerSGDHook(std::shared_ptr<ProcessGroup> pg,
                                         std::shared_ptr<PowerSGDState> state)
    : pg_(std::move(pg)), state_(std::move(state)) {}

std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  const uint64_t bytes = buffer.nbytes();
  counter_->add_call(bytes, allreduce_wire_bytes(bytes, pg_->size()));
  if (!state_->compressing()) {
    // torch's _allreduce_fut: the allreduce hook exactly.
    state_->maybe_increase_iter(bucket.is_last());
    counter_->add_traffic(bytes, allreduce_wire_bytes(bytes, pg_->size()));
    return allreduce_average(*pg_, buffer);
  }
  if (!buffer.device().is_cpu() || buffer.dtype() != DType::kFloat32) {
    return Future<Tensor>::failed(absl::InvalidArgumentError(
        "batched PowerSGD: the CPU hook needs a float32 CPU buffer, got " +
        buffer.str()));
  }
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  // The padded square lives in the bucket's scratch memory, reused across
  // steps (torch resizes the bucket buffer itself in place).
  std::vector<float>& padded = state_->bucket_memory(bucket.index()).padded;
  padded.assign(static_cast<size_t>(side * side), 0.0f);
  const float* in = buffer.data_as<float>();
  std::copy(in, in + length, padded.data());

  PowerSGDStepInput step;
  step.bucket_index = bucket.index();
  step.bucket_is_last = bucket.is_last();
  step.counter = counter_;
  step.buffer = Tensor::from_blob(padded.data(), {side * side}, DType::kFloat32);
  step.plan = plan_square(length, state_->options());
  step.finish = [buffer, square = step.buffer, length]() -> absl::StatusOr<Tensor> {
    const float* result = square.data_as<float>();
    std::copy(result, result + length, buffer.data_as<float>());
    return buffer;
  };
  return run_powersgd_step(pg_, state_, std::move(step));
}

absl::Status BatchedPowerSGDHook::save_state(std::ostream& out) const {
  return state_->save(out);
}

absl::Status BatchedPowerSGDHook::load_state(std::istream& in) {
  return state_->load(in);
}

}  // namespace ddpx
