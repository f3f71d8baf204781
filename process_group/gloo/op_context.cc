#include "process_group/gloo/op_context.h"

#include <algorithm>
#include <utility>

#include "process_group/gloo/sync_pairs.h"

namespace ddpx {

std::shared_ptr<gloo::Context> OpContext::sync_pairs() const {
  if (sync_context == nullptr) return nullptr;
  if (*sync_timeout != timeout) {
    set_sync_pair_timeout(*sync_context, timeout);
    *sync_timeout = timeout;
  }
  return sync_context;
}

AllreduceCall OpContext::allreduce_call(std::shared_ptr<gloo::Context> on, void* data,
                                        size_t count, DType dtype, ReduceOp op) const {
  AllreduceCall call;
  call.context = std::move(on);
  call.buffers = {data};
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.tag = tag;
  call.timeout = timeout;
  return call;
}

ReduceScatterCall OpContext::reduce_scatter_call(std::shared_ptr<gloo::Context> on,
                                                 const void* in, void* out, size_t count,
                                                 DType dtype, ReduceOp op,
                                                 uint32_t op_tag) const {
  ReduceScatterCall call;
  call.context = std::move(on);
  call.input = in;
  call.output = out;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.tag = op_tag;
  call.timeout = timeout;
  return call;
}

Tensor OpContext::scratch_for(int64_t numel, DType dtype) const {
  const int64_t nbytes = numel * static_cast<int64_t>(dtype_size(dtype));
  Tensor& buffer = *scratch;
  if (!buffer.defined() || buffer.numel() < nbytes) {
    buffer = Tensor::zeros({std::max<int64_t>(nbytes, 1)}, DType::kUInt8);
  }
  return Tensor::from_blob(buffer.data(), {numel}, dtype);
}

}  // namespace ddpx
