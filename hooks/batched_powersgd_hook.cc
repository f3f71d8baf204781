#include "hooks/batched_powersgd_hook.h"

#include <vector>

#include "hooks/powersgd_device_step.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_step.h"

namespace ddpx {

std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run_compressed(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  if (!buffer.device().is_cpu()) return run_on_device(bucket);
  if (absl::Status s = check_powersgd_bucket(buffer, "batched PowerSGD"); !s.ok()) {
    return Future<Tensor>::failed(s);
  }
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  // The padded square lives in the bucket's scratch memory, reused across
  // steps (torch resizes the bucket buffer itself in place); a float16 or
  // bfloat16 bucket is widened into it.
  std::vector<float>& padded = state().bucket_memory(bucket.index()).padded;
  padded.assign(static_cast<size_t>(side * side), 0.0f);
  if (absl::Status s = widen_into(buffer, padded.data(), "batched PowerSGD"); !s.ok()) {
    return Future<Tensor>::failed(s);
  }
  Tensor square = Tensor::from_blob(padded.data(), {side * side}, DType::kFloat32);
  return start_step(bucket, square, plan_square(length, state().options()),
                    [buffer, square]() -> absl::StatusOr<Tensor> {
                      // The first `length` values, in the bucket's dtype.
                      store_result(square.data_as<float>(), buffer);
                      return buffer;
                    });
}

// The same on the bucket's device: the square is a device tensor kept in the
// bucket's memory, zeroed and filled by device kernels each step.
std::shared_ptr<Future<Tensor>> BatchedPowerSGDHook::run_on_device(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  DeviceKernels* k = kernels_of(bucket);
  const int64_t length = buffer.numel();
  const int64_t side = square_side(length);
  Tensor& square = state().bucket_memory(bucket.index()).device_padded;
  if (!square.defined() || square.numel() != side * side ||
      square.device() != buffer.device()) {
    absl::StatusOr<Tensor> fresh = Tensor::empty({side * side}, DType::kFloat32, buffer.device());
    if (!fresh.ok()) return Future<Tensor>::failed(fresh.status());
    square = *fresh;
  }
  absl::Status s = k->fill(square, 0.0f);
  if (s.ok()) s = device_load_bucket(buffer, square, *k, "batched PowerSGD");
  if (!s.ok()) return Future<Tensor>::failed(s);
  const Tensor work = square;
  return start_device_step(bucket, work, plan_square(length, state().options()),
                           [buffer, work, k]() -> absl::StatusOr<Tensor> {
                             if (absl::Status s = device_store_result(work, buffer, *k);
                                 !s.ok()) {
                               return s;
                             }
                             return buffer;
                           });
}

}  // namespace ddpx
