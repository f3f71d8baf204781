#include "hooks/batched_powersgd_hook.h"

#include <vector>

#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_step.h"
#include "hooks/powersgd_work_buffer.h"

namespace ddpx {

std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run_compressed(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  DeviceKernels* k = &kernels_of(bucket);
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  // The padded square lives in the bucket's scratch memory, reused across
  // steps (torch resizes the bucket buffer itself in place): a host vector
  // for a CPU bucket, a tensor on the device for a device one. It is zeroed
  // and gets the bucket (widened from float16/bfloat16) at every step.
  PowerSGDBucketMemory& memory = state().bucket_memory(bucket.index());
  Tensor square;
  if (buffer.device().is_cpu()) {
    memory.padded.resize(static_cast<size_t>(side * side));
    square = Tensor::from_blob(memory.padded.data(), {side * side}, DType::kFloat32);
  } else {
    Tensor& kept = memory.device_padded;
    if (!kept.defined() || kept.numel() != side * side || kept.device() != buffer.device()) {
      absl::StatusOr<Tensor> fresh =
          Tensor::empty({side * side}, DType::kFloat32, buffer.device());
      if (!fresh.ok()) return Future<Tensor>::failed(fresh.status());
      kept = *fresh;
    }
    square = kept;
  }
  absl::Status s = k->fill(square, 0.0f);
  if (s.ok()) s = load_bucket(buffer, square, *k, "batched PowerSGD");
  if (!s.ok()) return Future<Tensor>::failed(s);
  return start_step(bucket, square, plan_square(length, state().options()),
                    [buffer, square, k]() -> absl::StatusOr<Tensor> {
                      // The first `length` values, in the bucket's dtype.
                      if (absl::Status s = store_result(square, buffer, *k); !s.ok()) {
                        return s;
                      }
                      return buffer;
                    });
}

}  // namespace ddpx
