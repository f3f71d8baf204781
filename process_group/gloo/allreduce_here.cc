// GlooBackend::small_allreduce_here: a small allreduce on the shared-memory
// path begun on the issuing thread (gloo_backend.h says when and why; the
// plan says whether it may, ExecutionPlan::allreduce_may_begin_here).
#include <sched.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "process_group/tracing/flight_recorder.h"
#include "process_group/gloo/collective_runner.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/gloo_work.h"
#include "process_group/gloo/shared_memory_path.h"
#include "process_group/shm/collectives.h"

namespace ddpx {
namespace {

// What is left of the op once begun: finishing it and completing its Work,
// here or later on the worker.
struct BegunAllreduce {
  shm::SmallAllreduce op;
  TensorList tensors;  // the caller's, kept alive for the rest of the op
  std::shared_ptr<GlooWork> work;
  TraceHandle trace;
  shm::Deadline deadline;
  ReduceOp reduce_op;
};

}  // namespace

std::shared_ptr<Work> GlooBackend::small_allreduce_here(const TensorList& tensors,
                                                        const AllreduceOptions& opts) {
  if (!plan_->allreduce_may_begin_here(tensors.size())) return nullptr;
  const Tensor& t = tensors[0];
  const shm::Reduction r = SharedMemoryPath::reduction(t.dtype(), opts.op);
  const size_t count = static_cast<size_t>(t.numel());
  // The op takes the next sequence number only if it can run here: its
  // worker idle with nothing queued, claimed before anybody can queue an op
  // behind this one.
  std::unique_lock<std::mutex> seq_lock(seq_mu_);
  const int worker = static_cast<int>(next_seq_ % worker_contexts_.size());
  shm::Channel& channel = shm_->channel(worker);
  if (!shm::SmallAllreduce::fits(channel, count, r) || !pool_->try_claim(worker)) return nullptr;
  ++next_seq_;
  seq_lock.unlock();

  const std::chrono::milliseconds timeout = op_timeout(opts.timeout);
  // On this thread's stack while the op may finish here; moved to the heap
  // only when its rest goes to the worker (with the Work it completes then).
  // Recorded once its data is on the way to the peers: the recorder's
  // writes then overlap the wait for theirs (flight_recorder.h, DeferredTrace).
  DeferredTrace to_record = CurrentTrace::claim_deferred();
  BegunAllreduce begun{shm::SmallAllreduce(channel, t.data(), count, r), {}, nullptr,
                       TraceHandle{}, shm::Deadline::from_first_wait(timeout), opts.op};
  // Finishes the op and returns the error, if any (recorded, and named after
  // the op); `outputs` hold the result. `data_seen_at`: when the peers' data
  // was seen (TraceClock ticks), or 0 for now.
  auto finish = [this](BegunAllreduce& b, const TensorList& outputs,
                       int64_t data_seen_at) -> absl::Status {
    absl::Status s = b.op.finish(b.deadline);
    if (!s.ok()) {
      op_failed_ = true;
      return b.trace.failed(decided_error(OpType::kAllreduce, TensorSummary(outputs), s));
    }
    finish_reduction(outputs[0], b.reduce_op, size());
    if (data_seen_at != 0) {
      b.trace.completed_at(data_seen_at);
    } else {
      b.trace.completed();
    }
    return absl::OkStatus();
  };

  absl::Status s = begun.op.begin(begun.deadline);
  begun.trace = to_record.record();
  begun.trace.started_at_issue();
  if (!s.ok()) {
    op_failed_ = true;
    s = begun.trace.failed(decided_error(OpType::kAllreduce, TensorSummary(tensors), s));
    pool_->release_claim(worker);
    return FutureWork::failed(OpType::kAllreduce, std::move(s));
  }
  // The completion time from the poll's own clock reads, taken while it
  // waits (the reduction after it takes nanoseconds).
  int64_t data_seen_at = 0;
  bool ready = begun.op.peers_ready(channel.spin(), begun.trace ? &TraceClock::now : nullptr,
                                    &data_seen_at);
  if (!ready && channel.issue_yield().count() > 0) {
    // More ranks than CPUs (WaitPolicy::issue_yield): the peers that have
    // not posted may need this CPU; give it to them between looks.
    const auto until = std::chrono::steady_clock::now() + channel.issue_yield();
    do {
      sched_yield();
      ready = begun.op.peers_ready(std::chrono::nanoseconds::zero(),
                                   begun.trace ? &TraceClock::now : nullptr, &data_seen_at);
    } while (!ready && std::chrono::steady_clock::now() < until);
  }
  if (ready) {
    // Done before anybody holds its Work: one that holds the result, with
    // no future, lock or waiter to set up for a wait that never happens.
    s = finish(begun, tensors, data_seen_at);
    if (!s.ok()) {
      pool_->release_claim(worker);
      return FutureWork::failed(OpType::kAllreduce, std::move(s));
    }
    // The worker's previous such Work when its caller let go of it (the
    // claim makes this thread the only one here).
    std::shared_ptr<CompletedWork>& kept = completed_here_[worker];
    if (kept != nullptr && kept.use_count() == 1) {
      // With the count's decrement by the thread that let go: what it did
      // to the work happened before what follows.
      std::atomic_thread_fence(std::memory_order_acquire);
      kept->reuse_for(tensors[0]);
    } else {
      kept = std::make_shared<CompletedWork>(OpType::kAllreduce, tensors[0]);
    }
    std::shared_ptr<Work> done = kept;
    pool_->release_claim(worker);
    return done;
  }
  // The peers have not posted yet: the rest runs as the worker's next task
  // (or on the thread that waits for it), keeping the caller's tensors.
  auto work = std::make_shared<GlooWork>(OpType::kAllreduce, timeout);
  begun.work = work;
  begun.tensors = tensors;
  // Its time starts now, whenever the worker or a waiter takes it up.
  begun.deadline = shm::Deadline::after(timeout);
  auto rest_of = std::make_shared<BegunAllreduce>(std::move(begun));
  WorkerPool::Task rest;
  rest.cancel = [b = rest_of.get()] {
    b->work->fail(b->trace.failed(absl::CancelledError(
        "allreduce: the gloo backend was destroyed before it finished")));
  };
  rest.run = [rest_of, finish] {
    BegunAllreduce& b = *rest_of;
    absl::Status done = finish(b, b.tensors, 0);
    if (done.ok()) {
      b.work->finish(b.tensors);
    } else {
      b.work->fail(std::move(done));
    }
  };
  work->set_ticket(pool_->release_claim(worker, std::move(rest)));
  return work;
}

}  // namespace ddpx
