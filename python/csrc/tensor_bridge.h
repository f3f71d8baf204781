// at::Tensor <-> ddpx::Tensor for the torch backend, and the reduce-op and
// dtype rules torch's Gloo backend follows.
//
// A contiguous CPU tensor is handed to ddpx as it is (ddpx reads and writes
// its memory). A non-contiguous one goes through a contiguous copy, and an
// op's outputs are copied back when the op completes, as torch's Gloo does:
// the caller sees its own tensors hold the result. bool travels as uint8
// (the same byte), its reductions mapped to the ones that keep 0/1 values
// (SUM and MAX are OR, PRODUCT and MIN are AND), which is what Gloo computes
// for bool.
#ifndef DDPX_PYTHON_CSRC_TENSOR_BRIDGE_H_
#define DDPX_PYTHON_CSRC_TENSOR_BRIDGE_H_

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "core/options.h"
#include "core/tensor.h"

namespace ddpx_torch {

// The dtypes torch's Gloo takes and ddpx moves: bool, int8, uint8, int32,
// int64, float16, bfloat16, float32, float64. Throws (RuntimeError in
// Python) naming the op and the dtype otherwise.
ddpx::DType to_ddpx_dtype(at::ScalarType type, const char* op);

// ddpx's reduce op for torch's on tensors of `type`: bool as above; AVG only
// on floating types and bitwise ops only on integer/bool types (the errors
// torch's Gloo gives); PREMUL_SUM refused. Throws naming the op.
ddpx::ReduceOp to_ddpx_reduce_op(const c10d::ReduceOp& op, at::ScalarType type,
                                 const char* op_name);

// kUnsetTimeout (negative) -> the group's current timeout.
ddpx::OpTimeout to_ddpx_timeout(std::chrono::milliseconds timeout,
                                std::chrono::milliseconds group_timeout);

// Which of an op's tensors an error is about: "input", "tensor 0",
// "output list 2, tensor 1". Spelled out only when an error is raised, so a
// good op builds no strings.
struct TensorLabel {
  const char* item;
  int64_t item_index = -1;  // none when negative
  const char* list = nullptr;  // the list the item is in, if any
  int64_t list_index = -1;

  TensorLabel at(int64_t i) const { return {item, i, list, list_index}; }
  std::string str() const;
};

// The tensors of one op: what ddpx sees, and what is copied back into the
// caller's tensors once the op is done. Holds every at::Tensor the op uses
// until the op's Work lets go of it.
class Staging {
 public:
  explicit Staging(const char* op) : op_(op) {}

  // A tensor ddpx only reads.
  ddpx::Tensor input(const at::Tensor& t, const TensorLabel& what);
  // A tensor ddpx writes (in-place ops: reads and writes).
  ddpx::Tensor output(const at::Tensor& t, const TensorLabel& what);
  // Tensor i of `ts` is `what.at(i)`.
  std::vector<ddpx::Tensor> inputs(const std::vector<at::Tensor>& ts, const TensorLabel& what);
  std::vector<ddpx::Tensor> outputs(const std::vector<at::Tensor>& ts, const TensorLabel& what);
  // Tensor j of list i is "<list> i, <item> j".
  std::vector<std::vector<ddpx::Tensor>> input_lists(const std::vector<std::vector<at::Tensor>>& lists,
                                            const char* list, const char* item);
  std::vector<std::vector<ddpx::Tensor>> output_lists(const std::vector<std::vector<at::Tensor>>& lists,
                                             const char* list, const char* item);

  const char* op() const { return op_; }
  // Copies the contiguous copies back into the caller's non-contiguous
  // outputs. Run once, after the op succeeded.
  void copy_back();

 private:
  ddpx::Tensor stage(const at::Tensor& t, const TensorLabel& what, bool written);
  std::vector<ddpx::Tensor> stage_all(const std::vector<at::Tensor>& ts, const TensorLabel& what,
                                      bool written);
  std::vector<std::vector<ddpx::Tensor>> stage_lists(const std::vector<std::vector<at::Tensor>>& lists,
                                            const char* list, const char* item, bool written);

  const char* op_;
  std::vector<at::Tensor> keep_;
  struct CopyBack {
    at::Tensor user;
    at::Tensor contiguous;
  };
  std::vector<CopyBack> copy_back_;
};

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_TENSOR_BRIDGE_H_
