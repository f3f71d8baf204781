#include "python/csrc/tensor_bridge.h"

#include <c10/util/Exception.h>

namespace ddpx_torch {

ddpx::DType to_ddpx_dtype(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kFloat: return ddpx::DType::kFloat32;
    case at::kDouble: return ddpx::DType::kFloat64;
    case at::kHalf: return ddpx::DType::kFloat16;
    case at::kBFloat16: return ddpx::DType::kBFloat16;
    case at::kChar: return ddpx::DType::kInt8;
    case at::kByte: return ddpx::DType::kUInt8;
    case at::kBool: return ddpx::DType::kUInt8;  // same byte, see to_ddpx_reduce_op
    case at::kInt: return ddpx::DType::kInt32;
    case at::kLong: return ddpx::DType::kInt64;
    default: break;
  }
  TORCH_CHECK(false, "ddpx: ", op, ": dtype ", c10::toString(type),
              " is not supported (ddpx moves bool, int8, uint8, int32, int64, float16, "
              "bfloat16, float32 and float64, the dtypes torch's gloo backend takes)");
}

ddpx::ReduceOp to_ddpx_reduce_op(const c10d::ReduceOp& op, at::ScalarType type,
                                 const char* op_name) {
  const bool is_bool = type == at::kBool;
  const bool floating = at::isFloatingType(type);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? ddpx::ReduceOp::MAX : ddpx::ReduceOp::SUM;
    case c10d::ReduceOp::PRODUCT: return is_bool ? ddpx::ReduceOp::MIN : ddpx::ReduceOp::PRODUCT;
    case c10d::ReduceOp::MIN: return ddpx::ReduceOp::MIN;
    case c10d::ReduceOp::MAX: return ddpx::ReduceOp::MAX;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(floating, "ddpx: ", op_name, ": ReduceOp.AVG needs a floating-point tensor, got ",
                  c10::toString(type), " (the average of integers is not one; torch's gloo "
                  "refuses it too)");
      return ddpx::ReduceOp::AVG;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR: {
      const char* name = op.op_ == c10d::ReduceOp::BAND ? "BAND"
                         : op.op_ == c10d::ReduceOp::BOR ? "BOR" : "BXOR";
      TORCH_CHECK(!floating, "ddpx: ", op_name, ": cannot use ReduceOp.", name,
                  " with non-integral dtype ", c10::toString(type));
      return op.op_ == c10d::ReduceOp::BAND ? ddpx::ReduceOp::BAND
             : op.op_ == c10d::ReduceOp::BOR ? ddpx::ReduceOp::BOR : ddpx::ReduceOp::BXOR;
    }
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(false, "ddpx: ", op_name, ": ReduceOp.PREMUL_SUM is not supported "
                  "(torch's gloo does not take it either; scale the tensor and use SUM)");
    default: break;
  }
  TORCH_CHECK(false, "ddpx: ", op_name, ": unknown reduce op ", static_cast<int>(op.op_));
}

ddpx::OpTimeout to_ddpx_timeout(std::chrono::milliseconds timeout,
                                std::chrono::milliseconds group_timeout) {
  if (timeout < std::chrono::milliseconds::zero()) return group_timeout;
  return timeout;
}

std::string TensorLabel::str() const {
  std::string s;
  if (list != nullptr) {
    s = list;
    if (list_index >= 0) s += " " + std::to_string(list_index);
    s += ", ";
  }
  s += item;
  if (item_index >= 0) s += " " + std::to_string(item_index);
  return s;
}

ddpx::Tensor Staging::stage(const at::Tensor& t, const TensorLabel& what, bool written) {
  TORCH_CHECK(t.defined(), "ddpx: ", op_, ": ", what.str(), " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "ddpx: ", op_, ": ", what.str(), " is a ",
              c10::str(t.layout()), " tensor; ddpx takes dense (strided) tensors");
  TORCH_CHECK(t.device().is_cpu(), "ddpx: ", op_, ": ", what.str(), " is on ", t.device().str(),
              "; the ddpx backend handles CPU tensors (use \"cpu:ddpx,cuda:nccl\" for both)");
  const ddpx::DType dtype = to_ddpx_dtype(t.scalar_type(), op_);
  at::Tensor dense = t;
  if (!t.is_contiguous()) {
    dense = t.contiguous();
    if (written) copy_back_.push_back({t, dense});
  }
  keep_.push_back(dense);
  return ddpx::Tensor::from_blob(dense.data_ptr(),
                                 ddpx::Shape(dense.sizes().begin(), dense.sizes().end()), dtype);
}

ddpx::Tensor Staging::input(const at::Tensor& t, const TensorLabel& what) {
  return stage(t, what, /*written=*/false);
}

ddpx::Tensor Staging::output(const at::Tensor& t, const TensorLabel& what) {
  return stage(t, what, /*written=*/true);
}

std::vector<ddpx::Tensor> Staging::stage_all(const std::vector<at::Tensor>& ts,
                                             const TensorLabel& what, bool written) {
  std::vector<ddpx::Tensor> out;
  out.reserve(ts.size());
  keep_.reserve(keep_.size() + ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    out.push_back(stage(ts[i], what.at(static_cast<int64_t>(i)), written));
  }
  return out;
}

std::vector<ddpx::Tensor> Staging::inputs(const std::vector<at::Tensor>& ts,
                                          const TensorLabel& what) {
  return stage_all(ts, what, /*written=*/false);
}

std::vector<ddpx::Tensor> Staging::outputs(const std::vector<at::Tensor>& ts,
                                           const TensorLabel& what) {
  return stage_all(ts, what, /*written=*/true);
}

std::vector<std::vector<ddpx::Tensor>> Staging::stage_lists(
    const std::vector<std::vector<at::Tensor>>& lists, const char* list, const char* item,
    bool written) {
  std::vector<std::vector<ddpx::Tensor>> out;
  out.reserve(lists.size());
  for (size_t i = 0; i < lists.size(); ++i) {
    out.push_back(stage_all(lists[i], TensorLabel{item, -1, list, static_cast<int64_t>(i)},
                            written));
  }
  return out;
}

std::vector<std::vector<ddpx::Tensor>> Staging::input_lists(
    const std::vector<std::vector<at::Tensor>>& lists, const char* list, const char* item) {
  return stage_lists(lists, list, item, /*written=*/false);
}

std::vector<std::vector<ddpx::Tensor>> Staging::output_lists(
    const std::vector<std::vector<at::Tensor>>& lists, const char* list, const char* item) {
  return stage_lists(lists, list, item, /*written=*/true);
}

void Staging::copy_back() {
  for (CopyBack& c : copy_back_) c.user.copy_(c.contiguous);
  copy_back_.clear();
}

}  // namespace ddpx_torch
