#include "process_group/gloo/collective_runner.h"

#include "process_group/gloo/event_loop_path.h"
#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/gloo/shared_memory_path.h"
#include "process_group/gloo/sync_pairs_path.h"
#include "process_group/gloo/two_level_allreduce.h"

namespace ddpx {
namespace {

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

// The tag of a list op's tensor i: each of the first kTagsPerOp has its own.
uint32_t tag_of_tensor(const OpContext& c, size_t i) {
  return c.tag + static_cast<uint32_t>(i % OpContext::kTagsPerOp);
}

}  // namespace

void finish_reduction(const Tensor& result, ReduceOp op, int size) {
  if (op == ReduceOp::AVG) {
    divide_in_place(result.data(), static_cast<size_t>(result.numel()), result.dtype(), size);
  }
}

void CollectiveRunner::allreduce_one(const OpContext& c, const Tensor& t, ReduceOp op) const {
  const size_t nbytes = t.nbytes();
  const size_t count = static_cast<size_t>(t.numel());
  switch (plan_.choose(Collective::kAllreduce, nbytes)) {
    case Path::kTwoLevel:
      throw_if_error(c.two_level->run(t, op, c.timeout));
      return;
    case Path::kSharedMemory:
      SharedMemoryPath(c).allreduce(t.data(), count, t.dtype(), op);
      return;
    case Path::kSyncPairs:
      SyncPairsPath(c).allreduce(plan_.tcp_allreduce(nbytes), plan_.sync_piece_bytes(), t.data(),
                                 count, t.dtype(), op);
      return;
    case Path::kEventLoop:
      EventLoopPath(c).allreduce(plan_.tcp_allreduce(nbytes).algorithm, t.data(), count,
                                 t.dtype(), op);
      return;
  }
}

void CollectiveRunner::allreduce(const OpContext& c, const TensorList& tensors,
                                 ReduceOp op) const {
  if (tensors.empty() || tensors[0].numel() == 0) return;
  const Tensor& first = tensors[0];
  const size_t count = static_cast<size_t>(first.numel());
  if (tensors.size() > 1) {
    UntypedReduceFn fn = reduce_function(first.dtype(), op);
    for (size_t i = 1; i < tensors.size(); ++i) fn(first.data(), first.data(), tensors[i].data(), count);
  }
  allreduce_one(c, first, op);
  finish_reduction(first, op, size_);
  for (size_t i = 1; i < tensors.size(); ++i) copy_bytes(tensors[i], first.data());
}

void CollectiveRunner::allreduce_coalesced(const OpContext& c, const TensorList& tensors,
                                           ReduceOp op) const {
  if (tensors.empty()) return;
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  Tensor flat = c.scratch_for(total, tensors[0].dtype());
  flatten_into(tensors, flat);
  allreduce(c, {flat}, op);
  unflatten_into(flat, tensors);
}

void CollectiveRunner::broadcast(const OpContext& c, const TensorList& tensors, int root,
                                 int root_tensor) const {
  if (tensors.empty()) return;
  const Tensor& main = rank_ == root ? tensors[root_tensor] : tensors[0];
  switch (plan_.choose(Collective::kBroadcast, main.nbytes())) {
    case Path::kSharedMemory:
      SharedMemoryPath(c).broadcast(main.data(), main.nbytes(), root);
      break;
    case Path::kSyncPairs:
      SyncPairsPath(c).broadcast(main.data(), main.nbytes(), root);
      break;
    default:
      EventLoopPath(c).broadcast(main.data(), main.nbytes(), root);
      break;
  }
  for (const Tensor& t : tensors) {
    if (t.data() != main.data()) copy_bytes(t, main.data());
  }
}

void CollectiveRunner::reduce(const OpContext& c, const TensorList& tensors, ReduceOp op,
                              int root, int root_tensor) const {
  if (tensors.empty() || tensors[0].numel() == 0) return;
  const bool is_root = rank_ == root;
  const Tensor& target = is_root ? tensors[root_tensor] : tensors[0];
  const size_t n = static_cast<size_t>(target.numel());
  if (tensors.size() > 1) {
    UntypedReduceFn fn = reduce_function(target.dtype(), op);
    for (const Tensor& t : tensors) {
      if (t.data() != target.data()) fn(target.data(), target.data(), t.data(), n);
    }
  }
  if (plan_.choose(Collective::kReduce, target.nbytes()) == Path::kSharedMemory) {
    SharedMemoryPath(c).reduce(target.data(), n, target.dtype(), op, root);
  } else {
    EventLoopPath(c).reduce(target.data(), n, target.dtype(), op, root);
  }
  if (is_root) finish_reduction(target, op, size_);
}

void CollectiveRunner::allgather_bytes(const OpContext& c, const void* in, void* out,
                                       size_t nbytes_per_rank, uint32_t tag) const {
  switch (plan_.choose(Collective::kAllgather, nbytes_per_rank)) {
    case Path::kSharedMemory:
      SharedMemoryPath(c).allgather(in, out, nbytes_per_rank);
      return;
    case Path::kSyncPairs:
      SyncPairsPath(c).allgather(in, out, nbytes_per_rank);
      return;
    default:
      EventLoopPath(c).allgather(in, out, nbytes_per_rank, tag);
      return;
  }
}

void CollectiveRunner::allgather(const OpContext& c, const std::vector<TensorList>& outputs,
                                 const TensorList& inputs) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (in.nbytes() == 0) continue;
    // Straight into the outputs when they are one piece of memory.
    void* span = contiguous_span(outputs[i]);
    std::vector<uint8_t> gathered(span == nullptr ? in.nbytes() * size_ : 0);
    uint8_t* dst = span != nullptr ? static_cast<uint8_t*>(span) : gathered.data();
    allgather_bytes(c, in.data(), dst, in.nbytes(), tag_of_tensor(c, i));
    if (span != nullptr) continue;
    for (int r = 0; r < size_; ++r) copy_bytes(outputs[i][r], gathered.data() + r * in.nbytes());
  }
}

void CollectiveRunner::allgather_into_tensor(const OpContext& c, const Tensor& output,
                                             const Tensor& input) const {
  if (input.nbytes() > 0) allgather_bytes(c, input.data(), output.data(), input.nbytes(), c.tag);
}

int64_t CollectiveRunner::reduce_scatter_scratch(Path path, const void* input,
                                                 const Tensor& output) const {
  switch (path) {
    case Path::kSharedMemory:
      return 0;  // it stages through the channel
    case Path::kSyncPairs:
      return SyncPairsPath::reduce_scatter_scratch(output.numel(), size_);
    default:
      return EventLoopPath::reduce_scatter_scratch(input, output.data(),
                                                   static_cast<size_t>(output.numel()),
                                                   output.dtype(), size_);
  }
}

void CollectiveRunner::reduce_scatter_one(const OpContext& c, Path path, const void* input,
                                          const Tensor& output, ReduceOp op, uint32_t tag,
                                          void* scratch) const {
  const size_t count = static_cast<size_t>(output.numel());
  if (count == 0) return;
  switch (path) {
    case Path::kSharedMemory:
      SharedMemoryPath(c).reduce_scatter(input, output.data(), count, output.dtype(), op);
      break;
    case Path::kSyncPairs:
      SyncPairsPath(c).reduce_scatter(input, output.data(), count, output.dtype(), op, scratch);
      break;
    default:
      EventLoopPath(c).reduce_scatter(input, output.data(), count, output.dtype(), op, tag,
                                      scratch);
      break;
  }
  finish_reduction(output, op, size_);
}

void CollectiveRunner::reduce_scatter(const OpContext& c, const TensorList& outputs,
                                      const std::vector<TensorList>& inputs, ReduceOp op) const {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (out.numel() == 0) continue;
    const Path path = plan_.choose(Collective::kReduceScatter, out.nbytes());
    // Straight from the inputs when they are one piece of memory; else
    // flattened into the front of the worker's scratch.
    const void* span = contiguous_span(inputs[i]);
    const int64_t flat = span != nullptr ? 0 : out.numel() * size_;
    const int64_t more = reduce_scatter_scratch(path, span, out);
    Tensor buffer = c.scratch_for(flat + more, out.dtype());
    if (span == nullptr) flatten_into(inputs[i], buffer);
    reduce_scatter_one(c, path, span != nullptr ? span : buffer.data(), out, op,
                       tag_of_tensor(c, i), bytes_of(buffer) + flat * out.element_size());
  }
}

void CollectiveRunner::reduce_scatter_tensor(const OpContext& c, const Tensor& output,
                                             const Tensor& input, ReduceOp op) const {
  if (output.numel() == 0) return;
  const Path path = plan_.choose(Collective::kReduceScatter, output.nbytes());
  Tensor scratch = c.scratch_for(reduce_scatter_scratch(path, input.data(), output), output.dtype());
  reduce_scatter_one(c, path, input.data(), output, op, c.tag, scratch.data());
}

void CollectiveRunner::gather(const OpContext& c, const std::vector<TensorList>& outputs,
                              const TensorList& inputs, int root) const {
  const bool is_root = rank_ == root;
  const Tensor& in = inputs[0];
  if (in.nbytes() == 0) return;
  void* span = is_root ? contiguous_span(outputs[0]) : nullptr;
  std::vector<uint8_t> gathered(is_root && span == nullptr ? in.nbytes() * size_ : 0);
  uint8_t* dst = span != nullptr ? static_cast<uint8_t*>(span) : gathered.data();
  if (plan_.choose(Collective::kGather, in.nbytes()) == Path::kSyncPairs) {
    SyncPairsPath(c).gather(in.data(), dst, in.nbytes(), root);
  } else {
    EventLoopPath(c).gather(in.data(), dst, in.nbytes(), root);
  }
  if (!is_root || span != nullptr) return;
  for (int r = 0; r < size_; ++r) copy_bytes(outputs[0][r], gathered.data() + r * in.nbytes());
}

void CollectiveRunner::scatter(const OpContext& c, const TensorList& outputs,
                               const std::vector<TensorList>& inputs, int root) const {
  const Tensor& out = outputs[0];
  if (out.nbytes() == 0) return;
  std::vector<uint8_t*> sources;
  if (rank_ == root) {
    for (const Tensor& t : inputs[0]) sources.push_back(bytes_of(t));
  }
  if (plan_.choose(Collective::kScatter, out.nbytes()) == Path::kSyncPairs) {
    SyncPairsPath(c).scatter(std::vector<const void*>(sources.begin(), sources.end()), out.data(),
                             out.nbytes(), root);
  } else {
    EventLoopPath(c).scatter(sources, out.data(), out.nbytes(), root);
  }
}

void CollectiveRunner::alltoall(const OpContext& c, const TensorList& outputs,
                                const TensorList& inputs) const {
  std::vector<int64_t> in_bytes, out_bytes;
  for (const Tensor& t : inputs) in_bytes.push_back(t.nbytes());
  for (const Tensor& t : outputs) out_bytes.push_back(t.nbytes());
  std::vector<uint8_t> in_flat;
  for (const Tensor& t : inputs) {
    const uint8_t* p = bytes_of(t);
    in_flat.insert(in_flat.end(), p, p + t.nbytes());
  }
  int64_t total_out = 0;
  for (int64_t b : out_bytes) total_out += b;
  std::vector<uint8_t> out_flat(total_out);
  if (plan_.choose(Collective::kAlltoall, 0) == Path::kSharedMemory) {
    SharedMemoryPath(c).alltoall(in_flat.data(), in_bytes, out_flat.data(), out_bytes);
  } else {
    EventLoopPath(c).alltoallv(in_flat.data(), in_bytes, out_flat.data(), out_bytes);
  }
  const uint8_t* src = out_flat.data();
  for (const Tensor& t : outputs) {
    copy_bytes(t, src);
    src += t.nbytes();
  }
}

void CollectiveRunner::alltoall_base(const OpContext& c, const Tensor& output,
                                     const Tensor& input, const std::vector<int64_t>& out_bytes,
                                     const std::vector<int64_t>& in_bytes) const {
  if (plan_.choose(Collective::kAlltoall, 0) == Path::kSharedMemory) {
    SharedMemoryPath(c).alltoall(input.data(), in_bytes, output.data(), out_bytes);
    return;
  }
  bool equal = true;
  for (size_t r = 0; r < in_bytes.size(); ++r) {
    equal = equal && in_bytes[r] == in_bytes[0] && out_bytes[r] == in_bytes[0];
  }
  if (equal && in_bytes[0] > 0 &&
      static_cast<size_t>(in_bytes[0]) * in_bytes.size() == input.nbytes()) {
    // Equal splits: Gloo's plain alltoall.
    EventLoopPath(c).alltoall(input.data(), input.nbytes(), output.data(), output.nbytes());
  } else {
    EventLoopPath(c).alltoallv(input.data(), in_bytes, output.data(), out_bytes);
  }
}

void CollectiveRunner::barrier(const OpContext& c) const {
  switch (plan_.choose(Collective::kBarrier, 0)) {
    case Path::kSharedMemory:
      SharedMemoryPath(c).barrier();
      return;
    case Path::kSyncPairs:
      SyncPairsPath(c).barrier();
      return;
    default:
      EventLoopPath(c).barrier();
      return;
  }
}

}  // namespace ddpx
