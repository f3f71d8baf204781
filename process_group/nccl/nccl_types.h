// How ddpx dtypes and ReduceOps map onto NCCL's, as plain C++.
//
// The numbers are ncclDataType_t / ncclRedOp_t values (NCCL's ABI);
// nccl_comm.cc static_asserts that they still match nccl.h, so this table is
// tested on the CPU and trusted by the CUDA code.
#ifndef DDPX_PROCESS_GROUP_NCCL_NCCL_TYPES_H_
#define DDPX_PROCESS_GROUP_NCCL_NCCL_TYPES_H_

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/options.h"

namespace ddpx {
namespace nccl {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};

enum class RedOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,  // NCCL >= 2.10: sums and divides by the number of ranks
};

DataType data_type(DType dtype);
// The NCCL reduction for `op` on `dtype`. NCCL has no bitwise reductions:
// BAND/BOR/BXOR are an InvalidArgument error that names the op, the dtype
// and the way out (a gloo group).
absl::StatusOr<RedOp> reduce_op(ReduceOp op, DType dtype);

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_NCCL_TYPES_H_
