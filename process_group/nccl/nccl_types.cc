#include "process_group/nccl/nccl_types.h"

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace nccl {

DataType data_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return DataType::kFloat32;
    case DType::kFloat64: return DataType::kFloat64;
    case DType::kFloat16: return DataType::kFloat16;
    case DType::kBFloat16: return DataType::kBfloat16;
    case DType::kInt8: return DataType::kInt8;
    case DType::kUInt8: return DataType::kUint8;
    case DType::kInt32: return DataType::kInt32;
    case DType::kInt64: return DataType::kInt64;
  }
  return DataType::kUint8;
}

absl::StatusOr<RedOp> reduce_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::SUM: return RedOp::kSum;
    case ReduceOp::AVG: return RedOp::kAvg;
    case ReduceOp::PRODUCT: return RedOp::kProd;
    case ReduceOp::MIN: return RedOp::kMin;
    case ReduceOp::MAX: return RedOp::kMax;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "nccl: ReduceOp ", reduce_op_name(op), " on ", dtype_name(dtype),
      " is not supported: NCCL has no bitwise reductions (use a gloo group for them)"));
}

}  // namespace nccl
}  // namespace ddpx
