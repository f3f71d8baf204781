// Reduction operators and the per-collective options objects.
#ifndef DDPX_CORE_OPTIONS_H_
#define DDPX_CORE_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace ddpx {

enum class ReduceOp : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR };

const char* reduce_op_name(ReduceOp op);
// Bitwise ops are defined on integer dtypes only; everything else accepts
// every dtype. The error names the op and the dtype.
absl::Status check_reduce_op(ReduceOp op, DType dtype);

// How long an op may take: a positive duration, or kUseGroupTimeout (the
// default) for the group's timeout. ProcessGroup resolves it once, before
// the backend sees the op, so a backend gets the value itself; a backend
// called directly (tests, benchmarks) applies its own creation timeout to an
// unset one. Not to be confused with kNoTimeout (future.h), which tells a
// wait() to wait for ever: the two have different types.
using OpTimeout = std::optional<std::chrono::milliseconds>;
inline constexpr std::nullopt_t kUseGroupTimeout = std::nullopt;

struct AllreduceOptions {
  ReduceOp op = ReduceOp::SUM;
  OpTimeout timeout = kUseGroupTimeout;
};

struct BroadcastOptions {
  int root_rank = 0;
  int root_tensor = 0;
  OpTimeout timeout = kUseGroupTimeout;
};

struct ReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  int root_rank = 0;
  int root_tensor = 0;
  OpTimeout timeout = kUseGroupTimeout;
};

struct AllgatherOptions {
  OpTimeout timeout = kUseGroupTimeout;
};

struct GatherOptions {
  int root_rank = 0;
  OpTimeout timeout = kUseGroupTimeout;
};

struct ScatterOptions {
  int root_rank = 0;
  OpTimeout timeout = kUseGroupTimeout;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  OpTimeout timeout = kUseGroupTimeout;
};

struct AllToAllOptions {
  OpTimeout timeout = kUseGroupTimeout;
};

struct BarrierOptions {
  OpTimeout timeout = kUseGroupTimeout;
};

struct SendRecvOptions {
  int tag = 0;
  OpTimeout timeout = kUseGroupTimeout;
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

#endif  // DDPX_CORE_OPTIONS_H_
