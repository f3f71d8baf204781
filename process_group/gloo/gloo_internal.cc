#include "process_group/gloo/gloo_internal.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {

TensorSummary::TensorSummary(const Tensor& tensor) : tensors_(1), dtype_(tensor.dtype()) {
  const Shape& shape = tensor.shape();
  ndim_ = static_cast<int>(shape.size());
  std::copy_n(shape.begin(), std::min(ndim_, kDims), dims_);
}

TensorSummary::TensorSummary(const TensorList& tensors) {
  if (tensors.empty()) return;
  *this = TensorSummary(tensors[0]);
  tensors_ = tensors.size();
}

std::string TensorSummary::str() const {
  if (tensors_ == 0) return "no tensors";
  std::string first = absl::StrCat(dtype_name(dtype_), "[",
                                   absl::StrJoin(dims_, dims_ + std::min(ndim_, kDims), ", "),
                                   ndim_ > kDims ? ", ...]" : "]");
  if (tensors_ == 1) return first;
  return absl::StrCat(tensors_, " tensors, first ", first);
}

std::string describe(const Tensor& tensor) { return TensorSummary(tensor).str(); }

std::string describe(const TensorList& tensors) { return TensorSummary(tensors).str(); }

void flatten_into(const TensorList& tensors, const Tensor& flat) {
  char* dst = static_cast<char*>(flat.data());
  for (const Tensor& t : tensors) {
    if (t.nbytes() > 0) memcpy(dst, t.data(), t.nbytes());
    dst += t.nbytes();
  }
}

void unflatten_into(const Tensor& flat, const TensorList& tensors) {
  const char* src = static_cast<const char*>(flat.data());
  for (const Tensor& t : tensors) {
    if (t.nbytes() > 0) memcpy(t.data(), src, t.nbytes());
    src += t.nbytes();
  }
}

void* contiguous_span(const TensorList& tensors) {
  if (tensors.empty()) return nullptr;
  const Tensor& first = tensors[0];
  int64_t next = first.storage_offset();
  for (const Tensor& t : tensors) {
    if (!t.shares_storage_with(first) || t.storage_offset() != next) return nullptr;
    next += t.numel();
  }
  return first.data();
}

void copy_bytes(void* dst, const Tensor& src) {
  if (src.nbytes() > 0) memcpy(dst, src.data(), src.nbytes());
}

void copy_bytes(const Tensor& dst, const void* src) {
  if (dst.nbytes() > 0) memcpy(dst.data(), src, dst.nbytes());
}

}  // namespace ddpx
