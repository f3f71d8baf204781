#include "hooks/batched_powersgd_hook.h"

#include <vector>

#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_step.h"

namespace ddpx {

std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run_compressed(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  // A device bucket is worked on through a host copy (host_buffer); a CPU
  // bucket is `staged` itself.
  absl::StatusOr<Tensor> host = host_buffer(bucket);
  if (!host.ok()) return Future<Tensor>::failed(host.status());
  const Tensor staged = *host;
  if (absl::Status s = check_powersgd_bucket(staged, "batched PowerSGD"); !s.ok()) {
    return Future<Tensor>::failed(s);
  }
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  // The padded square lives in the bucket's scratch memory, reused across
  // steps (torch resizes the bucket buffer itself in place); a float16 or
  // bfloat16 bucket is widened into it.
  std::vector<float>& padded = state().bucket_memory(bucket.index()).padded;
  padded.assign(static_cast<size_t>(side * side), 0.0f);
  if (absl::Status s = widen_into(staged, padded.data(), "batched PowerSGD"); !s.ok()) {
    return Future<Tensor>::failed(s);
  }
  Tensor square = Tensor::from_blob(padded.data(), {side * side}, DType::kFloat32);
  return start_step(bucket, square, plan_square(length, state().options()),
                    [buffer, staged, square]() -> absl::StatusOr<Tensor> {
                      // The first `length` values, in the bucket's dtype.
                      store_result(square.data_as<float>(), staged);
                      if (absl::Status s = write_back(staged, buffer); !s.ok()) return s;
                      return buffer;
                    });
}

}  // namespace ddpx
