#include "reducer/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace {

using BucketKey = std::tuple<DType, Device::Type, int>;

BucketKey key_of(const GradientSpec& g) {
  return {g.dtype, g.device.type, g.device.index};
}

struct OpenBucket {
  BucketSpec spec;
  size_t size_bytes = 0;
  size_t limit_index = 0;  // into size_limits_bytes; advances as buckets close
  size_t first_position = 0;
};

}  // namespace

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

size_t mb_to_bytes(double mb) { return static_cast<size_t>(mb * 1024.0 * 1024.0); }

absl::StatusOr<std::vector<BucketSpec>> compute_bucket_assignment(
    const std::vector<GradientSpec>& grads, const std::vector<size_t>& order,
    const std::vector<size_t>& size_limits_bytes) {
  if (size_limits_bytes.empty()) {
    return absl::InvalidArgumentError("bucket assignment: no bucket size limit given");
  }
  if (order.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket assignment: order lists ", order.size(), " gradients, expected ",
        grads.size()));
  }
  std::vector<bool> seen(grads.size(), false);
  for (size_t idx : order) {
    if (idx >= grads.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket assignment: gradient index ", idx, " out of range (", grads.size(),
          " gradients)"));
    }
    if (seen[idx]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket assignment: gradient index ", idx, " appears twice in the order"));
    }
    seen[idx] = true;
  }

  // Finished buckets with the position (in `order`) of their first gradient.
  std::vector<std::pair<size_t, BucketSpec>> done;
  std::map<BucketKey, OpenBucket> open;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    size_t idx = order[pos];
    OpenBucket& b = open[key_of(grads[idx])];
    if (b.spec.gradients.empty()) b.first_position = pos;
    b.spec.gradients.push_back(idx);
    b.size_bytes += grads[idx].nbytes();
    size_t limit = size_limits_bytes[b.limit_index];
    if (b.size_bytes >= limit) {
      b.spec.size_limit_bytes = limit;
      done.emplace_back(b.first_position, std::move(b.spec));
      b.spec = BucketSpec{};
      b.size_bytes = 0;
      if (b.limit_index + 1 < size_limits_bytes.size()) ++b.limit_index;
    }
  }
  for (auto& [key, b] : open) {
    if (b.spec.gradients.empty()) continue;
    b.spec.size_limit_bytes = size_limits_bytes[b.limit_index];
    done.emplace_back(b.first_position, std::move(b.spec));
  }
  std::sort(done.begin(), done.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketSpec> out;
  out.reserve(done.size());
  for (auto& d : done) out.push_back(std::move(d.second));
  return out;
}

}  // namespace ddpx
