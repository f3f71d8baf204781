#include "reducer/flat_buckets.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

std::vector<GradientSpec> gradient_specs(const std::vector<Tensor>& tensors) {
  std::vector<GradientSpec> specs;
  specs.reserve(tensors.size());
  for (const Tensor& t : tensors) specs.push_back({t.numel(), t.dtype(), t.device()});
  return specs;
}

absl::StatusOr<std::vector<FlatBucket>> make_flat_buckets(
    const std::vector<BucketSpec>& specs, const std::vector<Tensor>& like) {
  std::vector<FlatBucket> out;
  out.reserve(specs.size());
  for (size_t b = 0; b < specs.size(); ++b) {
    const BucketSpec& spec = specs[b];
    if (spec.gradients.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket ", b, " is empty"));
    }
    FlatBucket bucket;
    const Tensor& first = like.at(spec.gradients.front());
    int64_t numel = 0;
    for (size_t idx : spec.gradients) {
      const Tensor& t = like.at(idx);
      if (t.dtype() != first.dtype() || t.device() != first.device()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bucket ", b, " mixes ", first.str(), " and ", t.str(),
            "; a bucket holds one dtype on one device"));
      }
      bucket.members.push_back(idx);
      bucket.offsets.push_back(numel);
      bucket.shapes.push_back(t.shape());
      numel += t.numel();
    }
    absl::StatusOr<Tensor> buffer = Tensor::empty({numel}, first.dtype(), first.device());
    if (!buffer.ok()) return buffer.status();
    buffer->zero_();
    bucket.buffer = std::move(*buffer);
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      bucket.views.push_back(bucket.buffer.view(bucket.offsets[k], bucket.shapes[k]));
    }
    out.push_back(std::move(bucket));
  }
  return out;
}

absl::Status copy_into_bucket(const FlatBucket& bucket, const std::vector<Tensor>& tensors) {
  for (size_t k = 0; k < bucket.members.size(); ++k) {
    if (absl::Status s = bucket.views[k].copy_from(tensors.at(bucket.members[k])); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status copy_out_of_bucket(const FlatBucket& bucket, const std::vector<Tensor>& tensors,
                                const std::vector<bool>& written) {
  for (size_t k = 0; k < bucket.members.size(); ++k) {
    if (!written.empty() && !written.at(bucket.members[k])) continue;
    if (absl::Status s = tensors.at(bucket.members[k]).copy_from(bucket.views[k]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace ddpx
