#include "hooks/powersgd_device_step.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status device_load_bucket(const Tensor& bucket, const Tensor& into, DeviceKernels& k,
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

absl::StatusOr<Tensor> device_float32_work(const Tensor& bucket, DeviceKernels& k,
                                           const std::string& what) {
  if (bucket.defined() && bucket.dtype() == DType::kFloat32) return bucket.flatten();
  const int64_t n = bucket.defined() ? bucket.numel() : 0;
  absl::StatusOr<Tensor> work = Tensor::empty({n}, DType::kFloat32,
                                              bucket.defined() ? bucket.device() : Device::cpu());
  if (!work.ok()) return work.status();
  if (absl::Status s = device_load_bucket(bucket, *work, k, what); !s.ok()) return s;
  return work;
}

absl::Status device_store_result(const Tensor& work, const Tensor& bucket, DeviceKernels& k) {
  if (work.data() == bucket.data() && work.dtype() == bucket.dtype()) return absl::OkStatus();
  const Tensor head = work.flatten().view(0, {bucket.numel()});
  if (bucket.dtype() == DType::kFloat32) return k.copy(head, bucket.flatten());
  return k.cast(head, bucket.flatten());
}

std::vector<MatrixGroup> device_matrix_groups(const CompressionPlan& plan) {
  std::vector<MatrixGroup> groups;
  for (size_t i = 0; i < plan.matrices.size(); ++i) {
    const CompressedMatrix& mat = plan.matrices[i];
    if (!groups.empty()) {
      const CompressedMatrix& prev = plan.matrices[i - 1];
      const bool same_shape =
          mat.rows == prev.rows && mat.cols == prev.cols && mat.rank == prev.rank;
      const bool follows = mat.offset == prev.offset + prev.rows * prev.cols &&
                           mat.p_offset == prev.p_offset + prev.rows * prev.rank &&
                           mat.q_offset == prev.q_offset + prev.cols * prev.rank;
      if (same_shape && follows) {
        ++groups.back().count;
        continue;
      }
    }
    groups.push_back(MatrixGroup{i, 1});
  }
  return groups;
}

}  // namespace ddpx
