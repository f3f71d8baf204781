// c10d::Work over one or more ddpx Works: what a torch op on the ddpx
// backend returns.
//
// It completes when every ddpx part has (a coalesced op is several ddpx ops
// issued back to back): outputs staged through contiguous copies are
// copied back first, then wait() returns and the future holds the output
// tensors, as torch's Gloo Work does. A failure is the first part's error,
// raised by wait() and set on the future as a DistBackendError (a
// RuntimeError in Python) whose message is ddpx's: the op, its sequence
// number and the ranks it waited for.
#ifndef DDPX_PYTHON_CSRC_TORCH_WORK_H_
#define DDPX_PYTHON_CSRC_TORCH_WORK_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/status/status.h"
#include "core/work.h"
#include "python/csrc/tensor_bridge.h"

namespace ddpx_torch {

// The exception torch raises for a failed ddpx op ("ddpx: " + the status):
// a c10::DistBackendError, torch.distributed.DistBackendError in Python (a
// RuntimeError).
c10::DistBackendError backend_error(const std::string& message);
std::exception_ptr to_exception(const absl::Status& status);

class TorchWork : public c10d::Work {
 public:
  TorchWork(int rank, c10d::OpType type, const char* profiling_title,
            std::vector<at::Tensor> outputs, std::shared_ptr<Staging> staging,
            uint64_t sequence_number, std::chrono::milliseconds timeout);

  // Completes `work` when every one of `parts` has. A part that has failed
  // already (bad arguments) is thrown at once, as torch's Gloo throws from
  // the call.
  static c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<TorchWork> work,
                                              std::vector<std::shared_ptr<ddpx::Work>> parts);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;
  void abort() override;
  uint64_t getSequencenumber() const override { return sequence_number_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

 private:
  void part_done(const absl::Status& status);

  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<Staging> staging_;
  const uint64_t sequence_number_;
  const std::chrono::milliseconds timeout_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<std::shared_ptr<ddpx::Work>> parts_;  // set once by track()
  mutable std::mutex parts_mu_;  // parts_, first_error_, remaining_
  absl::Status first_error_;
  size_t remaining_ = 0;
};

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_TORCH_WORK_H_
