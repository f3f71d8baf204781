#include "hooks/powersgd_work_buffer.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status load_bucket(const Tensor& bucket, const Tensor& into, DeviceKernels& k,
                         const std::string& what) {
  const DType d = bucket.defined() ? bucket.dtype() : DType::kFloat32;
  if (!bucket.defined() ||
      (d != DType::kFloat32 && d != DType::kFloat16 && d != DType::kBFloat16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": needs a float32, float16 or bfloat16 bucket, got ",
        bucket.defined() ? bucket.str() : "an undefined buffer"));
  }
  const Tensor head = into.view(0, {bucket.numel()});
  if (d == DType::kFloat32) return k.copy(bucket.flatten(), head);
  return k.cast(bucket.flatten(), head);
}

absl::StatusOr<Tensor> float32_work(const Tensor& bucket, DeviceKernels& k,
                                    const std::string& what) {
  if (bucket.defined() && bucket.dtype() == DType::kFloat32) return bucket.flatten();
  const int64_t n = bucket.defined() ? bucket.numel() : 0;
  absl::StatusOr<Tensor> work = Tensor::empty({n}, DType::kFloat32,
                                              bucket.defined() ? bucket.device() : Device::cpu());
  if (!work.ok()) return work.status();
  if (absl::Status s = load_bucket(bucket, *work, k, what); !s.ok()) return s;
  return work;
}

absl::Status store_result(const Tensor& work, const Tensor& bucket, DeviceKernels& k) {
  if (work.data() == bucket.data() && work.dtype() == bucket.dtype()) return absl::OkStatus();
  const Tensor head = work.flatten().view(0, {bucket.numel()});
  if (bucket.dtype() == DType::kFloat32) return k.copy(head, bucket.flatten());
  return k.cast(head, bucket.flatten());
}

}  // namespace ddpx
