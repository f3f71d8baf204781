// Work of the nccl backend: a CUDA event per device recorded on the NCCL
// stream after the op. wait() makes the caller's current stream wait for the
// events (or, with blocking wait, blocks the host until they fire or time
// out); the watchdog completes get_future() once the events have fired and
// then lets go of the tensors the op used.
#ifndef DDPX_PROCESS_GROUP_NCCL_NCCL_WORK_H_
#define DDPX_PROCESS_GROUP_NCCL_NCCL_WORK_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/stream.h"
#include "process_group/nccl/nccl_comm.h"
#include "core/work.h"

namespace ddpx {
namespace nccl {

// A FutureWork whose future only the watchdog completes (finish below hides
// FutureWork's, so nothing completes it without releasing the tensors).
class NcclWork : public FutureWork {
 public:
  NcclWork(OpType op, std::shared_ptr<NcclComm> comm, std::vector<CudaEvent> done_events,
           TensorList in_use, TensorList outputs, bool blocking_wait);

  absl::Status wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;

  // For the watchdog: whether every event has fired.
  absl::StatusOr<bool> poll() const;
  // For the watchdog: completes the future and releases the tensors.
  void finish(absl::Status status);

 private:
  const std::shared_ptr<NcclComm> comm_;
  const std::vector<CudaEvent> done_events_;
  const bool blocking_wait_;
  std::mutex mu_;
  TensorList in_use_;  // kept alive until the GPU is done with them
  TensorList outputs_;
};

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_NCCL_WORK_H_
