#include "core/options.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
  }
  return "UNKNOWN";
}

absl::Status check_reduce_op(ReduceOp op, DType dtype) {
  bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && is_floating_point(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceOp ", reduce_op_name(op),
                     " is defined on integer dtypes only, got ", dtype_name(dtype)));
  }
  return absl::OkStatus();
}

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllreduceCoalesced: return "allreduce_coalesced";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kAllgatherIntoTensor: return "allgather_into_tensor";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kReduceScatterTensor: return "reduce_scatter_tensor";
    case OpType::kGather: return "gather";
    case OpType::kScatter: return "scatter";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kAlltoallBase: return "alltoall_base";
    case OpType::kBarrier: return "barrier";
    case OpType::kMonitoredBarrier: return "monitored_barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kRecvAnysource: return "recv_anysource";
  }
  return "unknown";
}

}  // namespace ddpx
