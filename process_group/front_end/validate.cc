#include "process_group/front_end/validate.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace validate {
namespace {

absl::Status invalid(OpType op, const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat(op_type_name(op), ": ", message));
}

absl::Status defined(OpType op, const std::string& what, const Tensor& t) {
  if (t.defined()) return absl::OkStatus();
  return invalid(op, absl::StrCat(what, " is undefined (an empty Tensor())"));
}

// Bitwise ops only make sense on integers (check_reduce_op says so); prefix
// the op so the caller knows which call it was.
absl::Status reduce_op_fits(OpType op, ReduceOp reduce_op, DType dtype) {
  absl::Status s = check_reduce_op(reduce_op, dtype);
  if (s.ok()) return s;
  return invalid(op, std::string(s.message()));
}

// One dtype and one device across a list of lists and the reference tensor.
absl::Status nested_matches(OpType op, const std::string& list_name,
                            const std::vector<TensorList>& lists,
                            const TensorList& like, size_t inner_size) {
  if (lists.size() != like.size()) {
    return invalid(op, absl::StrCat("expected ", like.size(), " ", list_name,
                                    " list(s) (one per input tensor), got ",
                                    lists.size()));
  }
  for (size_t i = 0; i < lists.size(); ++i) {
    if (lists[i].size() != inner_size) {
      return invalid(op, absl::StrCat(list_name, "[", i, "] holds ",
                                      lists[i].size(), " tensors, expected ",
                                      inner_size, " (one per rank)"));
    }
    for (size_t r = 0; r < lists[i].size(); ++r) {
      absl::Status s = matches(op, absl::StrCat(list_name, "[", i, "][", r, "]"),
                               lists[i][r], like[i], like[i].numel());
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status split_sizes(OpType op, const char* name,
                         const std::vector<int64_t>& splits, const Tensor& t,
                         int size) {
  if (splits.empty()) {
    int64_t rows = t.dim() == 0 ? t.numel() : t.size(0);
    if (rows % size != 0) {
      return invalid(op, absl::StrCat(name, " tensor ", t.str(),
                                      " has ", rows,
                                      " rows, not divisible into ", size,
                                      " equal splits; pass split sizes"));
    }
    return absl::OkStatus();
  }
  if (static_cast<int>(splits.size()) != size) {
    return invalid(op, absl::StrCat(name, "_split_sizes has ", splits.size(),
                                    " entries, expected ", size,
                                    " (one per rank)"));
  }
  if (t.dim() == 0) {
    return invalid(op, absl::StrCat(name, " tensor ", t.str(),
                                    " is 0-dimensional; split sizes count rows"));
  }
  int64_t sum = 0;
  for (size_t r = 0; r < splits.size(); ++r) {
    if (splits[r] < 0) {
      return invalid(op, absl::StrCat(name, "_split_sizes[", r, "] is ",
                                      splits[r], ", expected >= 0"));
    }
    sum += splits[r];
  }
  if (sum != t.size(0)) {
    return invalid(op, absl::StrCat(name, "_split_sizes sum to ", sum,
                                    ", expected ", t.size(0),
                                    " (the first dimension of ", t.str(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status rank_in_range(OpType op, const char* what, int rank, int size) {
  if (rank >= 0 && rank < size) return absl::OkStatus();
  return invalid(op, absl::StrCat(what, " ", rank,
                                  " is out of range for a group of size ", size,
                                  " (valid: 0..", size - 1, ")"));
}

absl::Status matches(OpType op, const std::string& what, const Tensor& tensor,
                     const Tensor& like, int64_t numel) {
  if (absl::Status s = defined(op, what, tensor); !s.ok()) return s;
  std::string prefix = absl::StrCat(op_type_name(op), ": ", what);
  if (absl::Status s = check_dtype(tensor, like.dtype(), prefix); !s.ok()) return s;
  if (absl::Status s = check_device(tensor, like.device(), prefix); !s.ok()) return s;
  return check_numel(tensor, numel, prefix);
}

absl::Status tensor_list(OpType op, const TensorList& tensors, bool same_numel) {
  if (tensors.empty()) return invalid(op, "expected at least one tensor, got none");
  if (absl::Status s = defined(op, "tensor 0", tensors[0]); !s.ok()) return s;
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::string what = absl::StrCat("tensor ", i);
    if (absl::Status s = defined(op, what, t); !s.ok()) return s;
    if (t.dtype() != tensors[0].dtype()) {
      return invalid(op, absl::StrCat(what, " has dtype ", dtype_name(t.dtype()),
                                      ", expected ",
                                      dtype_name(tensors[0].dtype()),
                                      " (the dtype of tensor 0)"));
    }
    if (t.device() != tensors[0].device()) {
      return invalid(op, absl::StrCat(what, " is on ", t.device().str(),
                                      ", expected ", tensors[0].device().str(),
                                      " (the device of tensor 0)"));
    }
    if (same_numel && t.numel() != tensors[0].numel()) {
      return invalid(op, absl::StrCat(what, " has ", t.numel(),
                                      " elements, expected ", tensors[0].numel(),
                                      " (the element count of tensor 0)"));
    }
  }
  return absl::OkStatus();
}

absl::Status allreduce(const TensorList& tensors, ReduceOp reduce_op) {
  if (absl::Status s = tensor_list(OpType::kAllreduce, tensors, true); !s.ok()) return s;
  return reduce_op_fits(OpType::kAllreduce, reduce_op, tensors[0].dtype());
}

absl::Status allreduce_coalesced(const TensorList& tensors, ReduceOp reduce_op) {
  const OpType op = OpType::kAllreduceCoalesced;
  if (absl::Status s = tensor_list(op, tensors, false); !s.ok()) return s;
  return reduce_op_fits(op, reduce_op, tensors[0].dtype());
}

absl::Status broadcast(const TensorList& tensors, const BroadcastOptions& opts,
                       int size) {
  const OpType op = OpType::kBroadcast;
  if (absl::Status s = tensor_list(op, tensors, true); !s.ok()) return s;
  if (absl::Status s = rank_in_range(op, "root_rank", opts.root_rank, size); !s.ok()) return s;
  return rank_in_range(op, "root_tensor", opts.root_tensor,
                       static_cast<int>(tensors.size()));
}

absl::Status reduce(const TensorList& tensors, const ReduceOptions& opts,
                    int size) {
  const OpType op = OpType::kReduce;
  if (absl::Status s = tensor_list(op, tensors, true); !s.ok()) return s;
  if (absl::Status s = rank_in_range(op, "root_rank", opts.root_rank, size); !s.ok()) return s;
  if (absl::Status s = rank_in_range(op, "root_tensor", opts.root_tensor,
                                     static_cast<int>(tensors.size()));
      !s.ok()) {
    return s;
  }
  return reduce_op_fits(op, opts.op, tensors[0].dtype());
}

absl::Status allgather(const std::vector<TensorList>& outputs,
                       const TensorList& inputs, int size) {
  const OpType op = OpType::kAllgather;
  if (absl::Status s = tensor_list(op, inputs, false); !s.ok()) return s;
  return nested_matches(op, "outputs", outputs, inputs, size);
}

absl::Status allgather_into_tensor(const Tensor& output, const Tensor& input,
                                   int size) {
  const OpType op = OpType::kAllgatherIntoTensor;
  if (absl::Status s = defined(op, "input", input); !s.ok()) return s;
  return matches(op, "output", output, input, input.numel() * size);
}

absl::Status reduce_scatter(const TensorList& outputs,
                            const std::vector<TensorList>& inputs,
                            ReduceOp reduce_op, int size) {
  const OpType op = OpType::kReduceScatter;
  if (absl::Status s = tensor_list(op, outputs, false); !s.ok()) return s;
  if (absl::Status s = nested_matches(op, "inputs", inputs, outputs, size); !s.ok()) return s;
  return reduce_op_fits(op, reduce_op, outputs[0].dtype());
}

absl::Status reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                   ReduceOp reduce_op, int size) {
  const OpType op = OpType::kReduceScatterTensor;
  if (absl::Status s = defined(op, "output", output); !s.ok()) return s;
  if (absl::Status s = matches(op, "input", input, output, output.numel() * size);
      !s.ok()) {
    return s;
  }
  return reduce_op_fits(op, reduce_op, output.dtype());
}

absl::Status gather(const std::vector<TensorList>& outputs,
                    const TensorList& inputs, int root_rank, int rank, int size) {
  const OpType op = OpType::kGather;
  if (absl::Status s = rank_in_range(op, "root_rank", root_rank, size); !s.ok()) return s;
  if (inputs.size() != 1) {
    return invalid(op, absl::StrCat("expected exactly 1 input tensor, got ",
                                    inputs.size()));
  }
  if (absl::Status s = defined(op, "input", inputs[0]); !s.ok()) return s;
  if (rank != root_rank) {
    if (!outputs.empty()) {
      return invalid(op, absl::StrCat("rank ", rank, " is not the root (",
                                      root_rank, ") and must pass no outputs, got ",
                                      outputs.size(), " list(s)"));
    }
    return absl::OkStatus();
  }
  return nested_matches(op, "outputs", outputs, inputs, size);
}

absl::Status scatter(const TensorList& outputs,
                     const std::vector<TensorList>& inputs, int root_rank,
                     int rank, int size) {
  const OpType op = OpType::kScatter;
  if (absl::Status s = rank_in_range(op, "root_rank", root_rank, size); !s.ok()) return s;
  if (outputs.size() != 1) {
    return invalid(op, absl::StrCat("expected exactly 1 output tensor, got ",
                                    outputs.size()));
  }
  if (absl::Status s = defined(op, "output", outputs[0]); !s.ok()) return s;
  if (rank != root_rank) {
    if (!inputs.empty()) {
      return invalid(op, absl::StrCat("rank ", rank, " is not the root (",
                                      root_rank, ") and must pass no inputs, got ",
                                      inputs.size(), " list(s)"));
    }
    return absl::OkStatus();
  }
  return nested_matches(op, "inputs", inputs, outputs, size);
}

absl::Status alltoall(const TensorList& outputs, const TensorList& inputs,
                      int size) {
  const OpType op = OpType::kAlltoall;
  if (static_cast<int>(inputs.size()) != size) {
    return invalid(op, absl::StrCat("expected ", size,
                                    " input tensors (one per rank), got ",
                                    inputs.size()));
  }
  if (static_cast<int>(outputs.size()) != size) {
    return invalid(op, absl::StrCat("expected ", size,
                                    " output tensors (one per rank), got ",
                                    outputs.size()));
  }
  if (absl::Status s = tensor_list(op, inputs, false); !s.ok()) return s;
  for (size_t r = 0; r < outputs.size(); ++r) {
    std::string what = absl::StrCat("output ", r);
    if (absl::Status s = defined(op, what, outputs[r]); !s.ok()) return s;
    std::string prefix = absl::StrCat(op_type_name(op), ": ", what);
    if (absl::Status s = check_dtype(outputs[r], inputs[0].dtype(), prefix); !s.ok()) return s;
    if (absl::Status s = check_device(outputs[r], inputs[0].device(), prefix); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status alltoall_base(const Tensor& output, const Tensor& input,
                           const std::vector<int64_t>& output_split_sizes,
                           const std::vector<int64_t>& input_split_sizes,
                           int size) {
  const OpType op = OpType::kAlltoallBase;
  if (absl::Status s = defined(op, "input", input); !s.ok()) return s;
  if (absl::Status s = defined(op, "output", output); !s.ok()) return s;
  std::string prefix = absl::StrCat(op_type_name(op), ": output");
  if (absl::Status s = check_dtype(output, input.dtype(), prefix); !s.ok()) return s;
  if (absl::Status s = check_device(output, input.device(), prefix); !s.ok()) return s;
  if (output_split_sizes.empty() && input_split_sizes.empty() &&
      output.numel() != input.numel()) {
    return invalid(op, absl::StrCat("with equal splits output and input must "
                                    "hold the same number of elements, got ",
                                    output.str(), " and ", input.str()));
  }
  if (absl::Status s = split_sizes(op, "input", input_split_sizes, input, size);
      !s.ok()) {
    return s;
  }
  return split_sizes(op, "output", output_split_sizes, output, size);
}

absl::Status timeout(OpType op, std::chrono::milliseconds timeout) {
  if (timeout > std::chrono::milliseconds::zero()) return absl::OkStatus();
  return invalid(op, absl::StrCat("timeout must be positive, got ", timeout.count(),
                                  " ms (leave it unset, kUseGroupTimeout, for the group's)"));
}

absl::Status send_recv(OpType op, const TensorList& tensors, int peer, int tag,
                       int rank, int size) {
  if (absl::Status s = tensor_list(op, tensors, false); !s.ok()) return s;
  if (op == OpType::kRecvAnysource && size <= 1) {
    return invalid(op, "a group of size 1 has no other rank to receive from");
  }
  if (op != OpType::kRecvAnysource) {
    const char* what = op == OpType::kSend ? "dst_rank" : "src_rank";
    if (absl::Status s = rank_in_range(op, what, peer, size); !s.ok()) return s;
    if (peer == rank) {
      return invalid(op, absl::StrCat(what, " ", peer,
                                      " is this rank; a rank cannot "
                                      "send to or receive from itself"));
    }
  }
  if (tag < 0) return invalid(op, absl::StrCat("tag ", tag, " is negative"));
  return absl::OkStatus();
}

}  // namespace validate
}  // namespace ddpx
