// GlooBackend's collectives other than the allreduce family: each maps onto
// one of Gloo's unbound-buffer collectives, moving raw bytes (only reductions
// care about the element type); broadcast, allgather, gather, scatter and
// small reduce-scatters run on the worker's sync pairs where those take
// them (sync_collectives.h, sync_pairs.h).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/reduce.h"
#include "gloo/scatter.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/gloo/reduce_scatter_ring.h"
#include "process_group/gloo/sync_collectives.h"
#include "process_group/shm/collectives.h"

namespace ddpx {
namespace {

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

}  // namespace

std::shared_ptr<Work> GlooBackend::broadcast(const TensorList& tensors,
                                             const BroadcastOptions& opts) {
  return enqueue(
      OpType::kBroadcast, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        if (tensors.empty()) return tensors;
        const Tensor& main =
            rank() == opts.root_rank ? tensors[opts.root_tensor] : tensors[0];
        if (c.shm != nullptr) {
          throw_if_error(shm::broadcast(*c.shm, main.data(), main.nbytes(), opts.root_rank,
                                        c.shm_deadline()));
        } else if (main.nbytes() > 0 && c.sync_context != nullptr &&
                   broadcast_runs_on_sync_pairs(main.nbytes(), sync_limits_)) {
          broadcast_classic(sync_pairs(c), main.data(), main.nbytes(), opts.root_rank);
        } else if (main.nbytes() > 0) {
          gloo::BroadcastOptions o(c.context);
          o.setOutput<uint8_t>(bytes_of(main), main.nbytes());
          o.setRoot(opts.root_rank);
          o.setTag(c.tag);
          o.setTimeout(c.timeout);
          gloo::broadcast(o);
        }
        for (const Tensor& t : tensors) {
          if (t.data() != main.data()) copy_bytes(t, main.data());
        }
        return tensors;
      },
      tensors.empty() ? 0
                      : match_key(tensors[0].nbytes(), tensors[0].dtype(), opts.root_rank));
}

// In place, like torch: the root's tensor gets the result; on other ranks
// the tensor is used as Gloo's scratch and holds partial sums afterwards.
std::shared_ptr<Work> GlooBackend::reduce(const TensorList& tensors,
                                          const ReduceOptions& opts) {
  return enqueue(
      OpType::kReduce, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        if (tensors.empty() || tensors[0].numel() == 0) return tensors;
        const bool is_root = rank() == opts.root_rank;
        const Tensor& target = is_root ? tensors[opts.root_tensor] : tensors[0];
        UntypedReduceFn fn = reduce_function(target.dtype(), opts.op);
        const size_t n = static_cast<size_t>(target.numel());
        for (const Tensor& t : tensors) {  // several local tensors: reduce them first
          if (t.data() != target.data()) fn(target.data(), target.data(), t.data(), n);
        }
        if (c.shm != nullptr) {
          throw_if_error(shm::reduce(*c.shm, target.data(), n, shm_reduction(target.dtype(), opts.op),
                                     opts.root_rank, c.shm_deadline()));
        } else visit_dtype(target.dtype(), [&](auto zero) {
          using T = decltype(zero);
          gloo::ReduceOptions o(c.context);
          o.setOutput<T>(static_cast<T*>(target.data()), n);
          o.setReduceFunction(fn);
          o.setRoot(opts.root_rank);
          o.setTag(c.tag);
          o.setTimeout(c.timeout);
          gloo::reduce(o);
        });
        if (is_root && opts.op == ReduceOp::AVG) {
          divide_in_place(target.data(), n, target.dtype(), size());
        }
        return tensors;
      },
      tensors.empty() ? 0
                      : match_key(tensors[0].nbytes(), tensors[0].dtype(), opts.root_rank));
}

void GlooBackend::allgather_bytes(const OpContext& c, const void* in, void* out,
                                  size_t nbytes_per_rank, uint32_t tag) const {
  if (c.shm != nullptr) {
    throw_if_error(shm::allgather(*c.shm, in, out, nbytes_per_rank,
                                  c.shm_deadline()));
    return;
  }
  if (c.sync_context != nullptr &&
      allgather_runs_on_sync_pairs(nbytes_per_rank, size(), sync_limits_)) {
    allgather_classic(sync_pairs(c), in, out, nbytes_per_rank);
    return;
  }
  gloo::AllgatherOptions o(c.context);
  o.setInput<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(in)), nbytes_per_rank);
  o.setOutput<uint8_t>(static_cast<uint8_t*>(out), nbytes_per_rank * size());
  o.setTag(tag);
  o.setTimeout(c.timeout);
  gloo::allgather(o);
}

std::shared_ptr<Work> GlooBackend::allgather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const AllgatherOptions& opts) {
  return enqueue(
      OpType::kAllgather, TensorSummary(inputs), opts.timeout,
      [this, outputs, inputs](const OpContext& c) -> absl::StatusOr<TensorList> {
        TensorList flat_outputs;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const Tensor& in = inputs[i];
          if (in.nbytes() == 0) continue;
          // Straight into the outputs when they are one piece of memory.
          void* span = contiguous_span(outputs[i]);
          std::vector<uint8_t> gathered(span == nullptr ? in.nbytes() * size() : 0);
          uint8_t* dst = span != nullptr ? static_cast<uint8_t*>(span) : gathered.data();
          allgather_bytes(c, in.data(), dst, in.nbytes(),
                          c.tag + static_cast<uint32_t>(i % kTagsPerOp));
          if (span != nullptr) continue;
          for (int r = 0; r < size(); ++r) {
            copy_bytes(outputs[i][r], gathered.data() + r * in.nbytes());
          }
        }
        for (const TensorList& list : outputs) {
          flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
        }
        return flat_outputs;
      });
}

std::shared_ptr<Work> GlooBackend::allgather_into_tensor(
    const Tensor& output, const Tensor& input, const AllgatherOptions& opts) {
  return enqueue(
      OpType::kAllgatherIntoTensor, TensorSummary(input), opts.timeout,
      [this, output, input](const OpContext& c) -> absl::StatusOr<TensorList> {
        if (input.nbytes() > 0) {
          allgather_bytes(c, input.data(), output.data(), input.nbytes(), c.tag);
        }
        return TensorList{output};
      });
}

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const uint8_t* x = static_cast<const uint8_t*>(a);
  const uint8_t* y = static_cast<const uint8_t*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

// Reduce-scatter of `n` chunks of `count` elements at `input` (chunk r for
// rank r) into `output`. Small inputs go through Gloo's classic
// halving-doubling on the sync pairs (where it fits as an allreduce of the
// whole input would: its messages are that allreduce's first half), the
// rest through the ring (reduce_scatter_ring.h).
bool GlooBackend::reduce_scatter_uses_classic(const Tensor& output,
                                              const OpContext& c) const {
  const size_t total = output.nbytes() * size();
  return size() > 1 && c.sync_context != nullptr && total <= kReduceScatterClassicUpToBytes &&
         allreduce_runs_on_sync_pairs(AllreduceAlgorithm::kHalvingDoubling, total, size(),
                                      sync_limits_);
}

// Scratch elements reduce_scatter_on_worker needs: the classic algorithm's
// in-place copy of the input; for the ring, its second buffer (3+ ranks) and
// a stand-in output when the caller's output lies inside the input (the
// ring receives into the output while it still reads the input). A null
// `input` stands for a private copy, which nothing overlaps.
int64_t GlooBackend::reduce_scatter_scratch(const void* input, const Tensor& output,
                                            const OpContext& c) const {
  const int64_t count = output.numel();
  if (c.shm != nullptr) return 0;  // it stages through the channel
  if (reduce_scatter_uses_classic(output, c)) return count * size();
  int64_t elements = size() > 2 ? count : 0;
  if (input != nullptr &&
      overlaps(input, output.nbytes() * size(), output.data(), output.nbytes())) {
    elements += count;
  }
  return elements;
}

void GlooBackend::reduce_scatter_on_worker(const void* input, const Tensor& output,
                                           ReduceOp op, const OpContext& c,
                                           uint32_t tag, uint8_t* scratch) const {
  const size_t count = static_cast<size_t>(output.numel());
  if (count == 0) return;
  if (c.shm != nullptr) {
    throw_if_error(shm::reduce_scatter(*c.shm, input, output.data(), count,
                                       shm_reduction(output.dtype(), op),
                                       c.shm_deadline()));
    if (op == ReduceOp::AVG) divide_in_place(output.data(), count, output.dtype(), size());
    return;
  }
  const size_t chunk_bytes = output.nbytes();
  ReduceScatterCall call;
  call.context = c.context;
  call.input = input;
  call.output = output.data();
  call.count = count;
  call.dtype = output.dtype();
  call.op = op;
  call.tag = tag;
  call.timeout = c.timeout;
  if (reduce_scatter_uses_classic(output, c)) {
    call.context = sync_pairs(c);
    run_reduce_scatter_halving_doubling(call, scratch);
    return;
  }
  const bool aliased = overlaps(input, chunk_bytes * size(), output.data(), chunk_bytes);
  if (size() > 2) {
    call.scratch = scratch;
    scratch += chunk_bytes;
  }
  if (aliased) call.output = scratch;
  run_reduce_scatter_ring(call);
  if (aliased) copy_bytes(output, call.output);
}

std::shared_ptr<Work> GlooBackend::reduce_scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ReduceScatterOptions& opts) {
  return enqueue(
      OpType::kReduceScatter, TensorSummary(outputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        for (size_t i = 0; i < outputs.size(); ++i) {
          const Tensor& out = outputs[i];
          if (out.numel() == 0) continue;
          // Straight from the inputs when they are one piece of memory;
          // else flattened into the front of the worker's scratch.
          const void* span = contiguous_span(inputs[i]);
          const int64_t flat = span != nullptr ? 0 : out.numel() * size();
          const int64_t more = reduce_scatter_scratch(span, out, c);
          Tensor buffer = scratch_for(c, flat + more, out.dtype());
          if (span == nullptr) flatten_into(inputs[i], buffer);
          reduce_scatter_on_worker(span != nullptr ? span : buffer.data(), out, opts.op, c,
                                   c.tag + static_cast<uint32_t>(i % kTagsPerOp),
                                   bytes_of(buffer) + flat * out.element_size());
        }
        return outputs;
      });
}

std::shared_ptr<Work> GlooBackend::reduce_scatter_tensor(
    const Tensor& output, const Tensor& input,
    const ReduceScatterOptions& opts) {
  return enqueue(
      OpType::kReduceScatterTensor, TensorSummary(input), opts.timeout,
      [this, output, input, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        if (output.numel() > 0) {
          Tensor scratch =
              scratch_for(c, reduce_scatter_scratch(input.data(), output, c), output.dtype());
          reduce_scatter_on_worker(input.data(), output, opts.op, c, c.tag, bytes_of(scratch));
        }
        return TensorList{output};
      });
}

std::shared_ptr<Work> GlooBackend::gather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const GatherOptions& opts) {
  return enqueue(
      OpType::kGather, TensorSummary(inputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        const bool is_root = rank() == opts.root_rank;
        const Tensor& in = inputs[0];
        if (in.nbytes() == 0) return is_root ? outputs[0] : TensorList{};
        void* span = is_root ? contiguous_span(outputs[0]) : nullptr;
        std::vector<uint8_t> gathered(is_root && span == nullptr ? in.nbytes() * size() : 0);
        uint8_t* dst = span != nullptr ? static_cast<uint8_t*>(span) : gathered.data();
        if (c.sync_context != nullptr &&
            rooted_op_runs_on_sync_pairs(in.nbytes(), sync_limits_)) {
          gather_classic(sync_pairs(c), in.data(), dst, in.nbytes(), opts.root_rank);
        } else {
          gloo::GatherOptions o(c.context);
          o.setInput<uint8_t>(bytes_of(in), in.nbytes());
          if (is_root) o.setOutput<uint8_t>(dst, in.nbytes() * size());
          o.setRoot(opts.root_rank);
          o.setTag(c.tag);
          o.setTimeout(c.timeout);
          gloo::gather(o);
        }
        if (!is_root) return TensorList{};
        if (span != nullptr) return outputs[0];
        for (int r = 0; r < size(); ++r) {
          copy_bytes(outputs[0][r], gathered.data() + r * in.nbytes());
        }
        return outputs[0];
      });
}

std::shared_ptr<Work> GlooBackend::scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ScatterOptions& opts) {
  return enqueue(
      OpType::kScatter, TensorSummary(outputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        const Tensor& out = outputs[0];
        if (out.nbytes() == 0) return outputs;
        std::vector<uint8_t*> sources;
        if (rank() == opts.root_rank) {
          for (const Tensor& t : inputs[0]) sources.push_back(bytes_of(t));
        }
        if (c.sync_context != nullptr &&
            rooted_op_runs_on_sync_pairs(out.nbytes(), sync_limits_)) {
          scatter_classic(sync_pairs(c), std::vector<const void*>(sources.begin(), sources.end()),
                          out.data(), out.nbytes(), opts.root_rank);
          return outputs;
        }
        gloo::ScatterOptions o(c.context);
        if (rank() == opts.root_rank) o.setInputs<uint8_t>(sources, out.nbytes());
        o.setOutput<uint8_t>(bytes_of(out), out.nbytes());
        o.setRoot(opts.root_rank);
        o.setTag(c.tag);
        o.setTimeout(c.timeout);
        gloo::scatter(o);
        return outputs;
      });
}

namespace {

// Gloo's alltoallv over byte counts; `in`/`out` may be empty buffers.
void alltoallv_bytes(const std::shared_ptr<gloo::Context>& context, void* in,
                     const std::vector<int64_t>& in_bytes, void* out,
                     const std::vector<int64_t>& out_bytes, uint32_t tag,
                     std::chrono::milliseconds timeout) {
  int64_t total_in = 0, total_out = 0;
  for (int64_t b : in_bytes) total_in += b;
  for (int64_t b : out_bytes) total_out += b;
  if (total_in == 0 && total_out == 0) return;
  // Gloo wants real pointers even for an empty side.
  static uint8_t empty_side[1];
  gloo::AlltoallvOptions o(context);
  o.setInput<uint8_t>(total_in > 0 ? static_cast<uint8_t*>(in) : empty_side,
                      in_bytes);
  o.setOutput<uint8_t>(total_out > 0 ? static_cast<uint8_t*>(out) : empty_side,
                       out_bytes);
  o.setTag(tag);
  o.setTimeout(timeout);
  gloo::alltoallv(o);
}

}  // namespace

std::shared_ptr<Work> GlooBackend::alltoall(const TensorList& outputs,
                                            const TensorList& inputs,
                                            const AllToAllOptions& opts) {
  return enqueue(
      OpType::kAlltoall, TensorSummary(inputs), opts.timeout,
      [outputs, inputs](const OpContext& c) -> absl::StatusOr<TensorList> {
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
        alltoallv_bytes(c.context, in_flat.data(), in_bytes, out_flat.data(),
                        out_bytes, c.tag, c.timeout);
        const uint8_t* src = out_flat.data();
        for (const Tensor& t : outputs) {
          copy_bytes(t, src);
          src += t.nbytes();
        }
        return outputs;
      });
}

namespace {

// Per-rank byte counts of a tensor split along its first dimension.
std::vector<int64_t> split_bytes(const Tensor& t, const std::vector<int64_t>& rows,
                                 int size) {
  std::vector<int64_t> bytes(size);
  if (rows.empty()) {
    for (int r = 0; r < size; ++r) bytes[r] = t.nbytes() / size;
    return bytes;
  }
  const int64_t rows_total = t.dim() > 0 ? t.size(0) : 1;
  const int64_t row_bytes = rows_total > 0 ? t.nbytes() / rows_total : 0;
  for (int r = 0; r < size; ++r) bytes[r] = rows[r] * row_bytes;
  return bytes;
}

}  // namespace

std::shared_ptr<Work> GlooBackend::alltoall_base(
    const Tensor& output, const Tensor& input,
    const std::vector<int64_t>& output_split_sizes,
    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  std::vector<int64_t> in_bytes = split_bytes(input, input_split_sizes, size());
  std::vector<int64_t> out_bytes = split_bytes(output, output_split_sizes, size());
  return enqueue(OpType::kAlltoallBase, TensorSummary(input), opts.timeout,
                 [output, input, in_bytes, out_bytes](
                     const OpContext& c) -> absl::StatusOr<TensorList> {
                   bool equal = true;
                   for (size_t r = 0; r < in_bytes.size(); ++r) {
                     equal = equal && in_bytes[r] == in_bytes[0] && out_bytes[r] == in_bytes[0];
                   }
                   if (equal && in_bytes[0] > 0 &&
                       static_cast<size_t>(in_bytes[0]) * in_bytes.size() == input.nbytes()) {
                     // Equal splits: Gloo's plain alltoall.
                     gloo::AlltoallOptions o(c.context);
                     o.setInput<uint8_t>(bytes_of(input), input.nbytes());
                     o.setOutput<uint8_t>(bytes_of(output), output.nbytes());
                     o.setTag(c.tag);
                     o.setTimeout(c.timeout);
                     gloo::alltoall(o);
                   } else {
                     alltoallv_bytes(c.context, input.data(), in_bytes,
                                     output.data(), out_bytes, c.tag, c.timeout);
                   }
                   return TensorList{output};
                 });
}

}  // namespace ddpx
