// Reduction operators and the per-collective options objects.
#ifndef DDPX_PROCESS_GROUP_OPTIONS_H_
#define DDPX_PROCESS_GROUP_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "process_group/dtype.h"

namespace ddpx {

enum class ReduceOp : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR };

const char* reduce_op_name(ReduceOp op);
// Bitwise ops are defined on integer dtypes only; everything else accepts
// every dtype. The error names the op and the dtype.
absl::Status check_reduce_op(ReduceOp op, DType dtype);

// A timeout of kUseGroupTimeout means "the process group's default".
inline constexpr std::chrono::milliseconds kUseGroupTimeout{-1};

struct AllreduceOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct BroadcastOptions {
  int root_rank = 0;
  int root_tensor = 0;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct ReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  int root_rank = 0;
  int root_tensor = 0;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct AllgatherOptions {
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct GatherOptions {
  int root_rank = 0;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct ScatterOptions {
  int root_rank = 0;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct AllToAllOptions {
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

struct SendRecvOptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kUseGroupTimeout;
};

// Which collective a Work or a debug-mode check is about.
enum class OpType : uint8_t {
  kAllreduce,
  kAllreduceCoalesced,
  kBroadcast,
  kReduce,
  kAllgather,
  kAllgatherIntoTensor,
  kReduceScatter,
  kReduceScatterTensor,
  kGather,
  kScatter,
  kAlltoall,
  kAlltoallBase,
  kBarrier,
  kMonitoredBarrier,
  kSend,
  kRecv,
  kRecvAnysource,
};
const char* op_type_name(OpType op);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_OPTIONS_H_
