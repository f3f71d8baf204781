// Tensor helpers the GlooBackend's op bodies share (not part of the API).
#ifndef DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_
#define DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_

#include <string>
#include <vector>

#include "process_group/tensor.h"
#include "process_group/work.h"

namespace ddpx {

// "float32[1024]", "2 x float32[4, 4]", "no tensors": for error messages.
std::string describe(const TensorList& tensors);
std::string describe(const Tensor& tensor);

// A new 1-D tensor holding the tensors' elements back to back (all of one
// dtype), and the way back.
Tensor flatten_copy(const TensorList& tensors);
void unflatten_into(const Tensor& flat, const TensorList& tensors);

// When the tensors are back-to-back views of one storage (in list order),
// the address of the first byte, so a collective can write them in one
// piece; else null.
void* contiguous_span(const TensorList& tensors);

// memcpy of a tensor's bytes; both sides CPU, sizes already validated.
void copy_bytes(void* dst, const Tensor& src);
void copy_bytes(const Tensor& dst, const void* src);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_GLOO_INTERNAL_H_
