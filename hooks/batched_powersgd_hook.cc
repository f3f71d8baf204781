#include "hooks/batched_powersgd_hook.h"

#include <algorithm>
#include <vector>

#include "hooks/powersgd_plan.h"

namespace ddpx {

std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run_compressed(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  if (!buffer.device().is_cpu() || buffer.dtype() != DType::kFloat32) {
    return Future<Tensor>::failed(absl::InvalidArgumentError(
        "batched PowerSGD: the CPU hook needs a float32 CPU buffer, got " +
        buffer.str()));
  }
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  // The padded square lives in the bucket's scratch memory, reused across
  // steps (torch resizes the bucket buffer itself in place).
  std::vector<float>& padded = state().bucket_memory(bucket.index()).padded;
  padded.assign(static_cast<size_t>(side * side), 0.0f);
  const float* in = buffer.data_as<float>();
  std::copy(in, in + length, padded.data());
  Tensor square = Tensor::from_blob(padded.data(), {side * side}, DType::kFloat32);
  return start_step(bucket, square, plan_square(length, state().options()),
                    [buffer, square, length]() -> absl::StatusOr<Tensor> {
                      const float* result = square.data_as<float>();
                      std::copy(result, result + length, buffer.data_as<float>());
                      return buffer;
                    });
}

}  // namespace ddpx
