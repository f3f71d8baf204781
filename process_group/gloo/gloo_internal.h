// Tensor helpers the GlooBackend's op bodies share (not part of the API).
#ifndef DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_
#define DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_

#include <exception>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "core/work.h"

namespace ddpx {

// What an op's tensors are, for its error messages: the first one's dtype
// and shape and how many there are, kept as plain values. An op is
// described this way when it is issued and formatted only if it fails, so
// a small op does not pay for formatting (a tenth of an 8 B allreduce on
// shared memory).
class TensorSummary {
 public:
  TensorSummary() = default;  // no tensors
  explicit TensorSummary(const Tensor& tensor);
  explicit TensorSummary(const TensorList& tensors);
  // "float32[1024]", "2 tensors, first float32[4, 4]", "no tensors"; dims
  // past the eighth are shown as "...".
  std::string str() const;

 private:
  static constexpr int kDims = 8;
  size_t tensors_ = 0;
  DType dtype_ = DType::kFloat32;
  int ndim_ = 0;
  int64_t dims_[kDims] = {};
};

// TensorSummary(...).str().
std::string describe(const TensorList& tensors);
std::string describe(const Tensor& tensor);

// Copies the tensors' elements back to back into `flat` (all of one dtype;
// `flat` holds at least their total), and the way back.
void flatten_into(const TensorList& tensors, const Tensor& flat);
void unflatten_into(const Tensor& flat, const TensorList& tensors);

// When the tensors are back-to-back views of one storage (in list order),
// the address of the first byte, so a collective can write them in one
// piece; else null.
void* contiguous_span(const TensorList& tensors);

// memcpy of a tensor's bytes; both sides CPU, sizes already validated.
void copy_bytes(void* dst, const Tensor& src);
void copy_bytes(const Tensor& dst, const void* src);

// A failure with its Status already decided (the shared-memory path's),
// thrown out of an op body like Gloo's exceptions; enqueue() passes the
// status on with the op's name in front.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "ddpx::StatusError"; }

 private:
  absl::Status status_;
};

inline void throw_if_error(absl::Status status) {
  if (!status.ok()) throw StatusError(std::move(status));
}

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_
