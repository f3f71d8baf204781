#include "process_group/gloo/gloo_internal.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ddpx {

std::string describe(const Tensor& tensor) {
  return absl::StrCat(dtype_name(tensor.dtype()), shape_str(tensor.shape()));
}

std::string describe(const TensorList& tensors) {
  if (tensors.empty()) return "no tensors";
  if (tensors.size() == 1) return describe(tensors[0]);
  return absl::StrCat(tensors.size(), " tensors, first ", describe(tensors[0]));
}

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
