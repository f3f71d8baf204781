// One bucket of gradients handed to a communication hook: a flat buffer that
// holds several gradients back to back (torch's GradBucket, PyTorch's "DDP
// Communication Hooks" documentation).
#ifndef DDPX_HOOKS_GRAD_BUCKET_H_
#define DDPX_HOOKS_GRAD_BUCKET_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace ddpx {

class GradBucket {
 public:
  // `buffer` is flat; gradient i occupies numel(shapes[i]) elements starting
  // at offsets[i]. `parameters[i]` is the parameter gradient i belongs to.
  GradBucket(size_t index, bool is_last, Tensor buffer,
             std::vector<int64_t> offsets, std::vector<Shape> shapes,
             std::vector<Tensor> parameters)
      : index_(index),
        is_last_(is_last),
        buffer_(std::move(buffer)),
        offsets_(std::move(offsets)),
        shapes_(std::move(shapes)),
        parameters_(std::move(parameters)) {}

  // Index of the bucket; bucket 0 holds the last parameters registered, whose
  // gradients are ready first. Not stable before buckets are rebuilt after
  // the first iteration.
  size_t index() const { return index_; }
  // The flattened gradients of this bucket.
  const Tensor& buffer() const { return buffer_; }
  // Per-parameter gradient tensors: views into buffer() with their shapes.
  std::vector<Tensor> gradients() const {
    std::vector<Tensor> out;
    out.reserve(shapes_.size());
    for (size_t i = 0; i < shapes_.size(); ++i)
      out.push_back(buffer_.view(offsets_[i], shapes_[i]));
    return out;
  }
  const std::vector<Tensor>& parameters() const { return parameters_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<Shape>& shapes() const { return shapes_; }
  // Whether this is the last bucket to allreduce in an iteration.
  bool is_last() const { return is_last_; }
  // Replaces the bucket's contents with `tensor` (same dtype and numel).
  absl::Status set_buffer(const Tensor& tensor) { return buffer_.copy_from(tensor); }

 private:
  size_t index_;
  bool is_last_;
  Tensor buffer_;
  std::vector<int64_t> offsets_;
  std::vector<Shape> shapes_;
  std::vector<Tensor> parameters_;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_GRAD_BUCKET_H_
