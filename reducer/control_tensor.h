// The reducer's control messages (the parameter descriptions, rank 0's
// bucket order, join's active-rank flags and election) are small CPU
// tensors. A backend that takes CUDA tensors only (NCCL) gets them on the
// model's device, as torch's DDP sends its own control tensors on the
// parameters' device; on a CPU model they travel as they are.
#ifndef DDPX_REDUCER_CONTROL_TENSOR_H_
#define DDPX_REDUCER_CONTROL_TENSOR_H_

#include <chrono>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "core/work.h"
#include "reducer/model_parameters.h"

namespace ddpx {

// Where the model's control messages travel: its first parameter's device
// (DDP requires every parameter of a rank on one device), CPU for none.
Device control_device(const ModelParameters& model);

// A copy of CPU tensor `host` on `device`, or `host` itself when `device`
// is the CPU.
absl::StatusOr<Tensor> control_on_device(const Tensor& host, Device device);

// Runs `collective` (in place) on `host`'s copy on `device`, waits, and
// copies the result back into `host`.
absl::Status run_control_collective(
    const Tensor& host, Device device,
    const std::function<std::shared_ptr<Work>(const Tensor&)>& collective,
    std::chrono::milliseconds timeout = kNoTimeout);

}  // namespace ddpx

#endif  // DDPX_REDUCER_CONTROL_TENSOR_H_
