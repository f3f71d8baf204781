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
//
// Where the future completes: a future nobody has asked for (getFuture()
// not called, as for a plain `dist.all_reduce(t)`) has no callbacks, so the
// ddpx thread that finished the last part completes it and the Work inline,
// and wait() pays no hand-off. Once getFuture() has handed it out, callbacks
// may be attached, and they may issue and wait on further ops of this group;
// the Work and its future then complete on a completion thread
// (python/csrc/completion_pool.h), never on the ddpx worker that still
// holds the group's turn. Either way the future completes before the Work,
// so once wait() returns the future is done too, as with torch's Gloo.
#ifndef DDPX_PYTHON_CSRC_TORCH_WORK_H_
#define DDPX_PYTHON_CSRC_TORCH_WORK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
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

// A Work's tensors may own their Python objects, which only a thread
// holding the GIL can free; a thread that asks for the GIL while the
// interpreter shuts down is ended by Python in the middle of a destructor,
// and C++ terminates the process. So ddpx's threads must not be the last
// to let go of a Work once the program may be exiting:
//  - wait() returns only after ddpx's threads have let go of the Work (they
//    do so right after completing it), so a program that waited for an op
//    and then exits leaves the last reference to its own thread;
//  - after Python's atexit (ddpx_torch/__init__.py calls
//    mark_python_exiting), or while the interpreter finalizes, a Work that
//    ddpx's threads would free is left to the ending process instead.
void mark_python_exiting();

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
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  void abort() override;
  uint64_t getSequencenumber() const override { return sequence_number_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
  // c10d::Work::wait, then (once complete) until ddpx's threads hold no
  // reference to this Work (see mark_python_exiting). Without a timeout it
  // first runs the parts here where it can (run_parts_here).
  bool wait(std::chrono::milliseconds timeout) override;

 private:
  // Counts the references ddpx's threads hold; wait() waits for zero.
  class Holders {
   public:
    void add(size_t n);
    void drop();
    void wait_none();

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    size_t count_ = 0;
  };

  // wait() without a timeout (what a synchronous torch op does right after
  // issuing it): the ddpx parts' own waits, which run a part its worker has
  // not started on this thread instead of waking the worker and then being
  // woken by it (gloo_work.h); two thread hand-offs less per op.
  void run_parts_here();
  // Records one part's end; true for the last part.
  bool part_done(const absl::Status& status);
  // Copies staged outputs back, completes the future, then the Work.
  void complete();

  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<Staging> staging_;
  const uint64_t sequence_number_;
  const std::chrono::milliseconds timeout_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<std::shared_ptr<ddpx::Work>> parts_;  // set once by track()
  mutable std::mutex parts_mu_;  // parts_, first_error_, remaining_
  absl::Status first_error_;
  size_t remaining_ = 0;
  // Guards future_handed_out_ and, for a future not handed out, its inline
  // completion: getFuture() cannot hand it out (and let callbacks be
  // attached) while a ddpx worker is completing it.
  std::mutex future_mu_;
  bool future_handed_out_ = false;
  // Shared with the callbacks, which open it after letting go of the Work.
  const std::shared_ptr<Holders> holders_ = std::make_shared<Holders>();
};

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_TORCH_WORK_H_
