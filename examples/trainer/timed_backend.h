// A Backend wrapper that stamps every collective: when this rank called it
// and when its Work completed, on the host's CLOCK_MONOTONIC (shared by all
// processes of one machine). Point-to-point ops pass through unstamped.
//
// The bandwidth benchmark runs DDP and the hook on a ProcessGroup over this
// wrapper (--comm_trace) and takes, per collective,
//   transfer = (latest completion over ranks) - (latest call over ranks):
// a collective cannot move data before its last rank arrives, so this is the
// network's time proper, without a straggler's compute and without the
// hook's own compression math around the collective (timed_hook.h measures
// that wider span).
#ifndef DDPX_EXAMPLES_TRAINER_TIMED_BACKEND_H_
#define DDPX_EXAMPLES_TRAINER_TIMED_BACKEND_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "examples/trainer/grad_sync.h"
#include "core/backend.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

class TimedBackend : public Backend {
 public:
  explicit TimedBackend(std::shared_ptr<Backend> inner);

  // A ProcessGroup over a TimedBackend wrapping `pg`'s backend (same store,
  // timeout and rank); `timed` receives the wrapper to read the stamps from.
  static std::shared_ptr<ProcessGroup> wrap(const ProcessGroup& pg,
                                            std::shared_ptr<TimedBackend>* timed);

  // The collectives stamped since the last call, in call order (`bucket` is
  // the call's sequence number), and forgets them. Call once they completed.
  std::vector<CommSpan> take_spans();

  std::string name() const override { return inner_->name(); }
  const HostTopology* host_topology() const override { return inner_->host_topology(); }
  std::shared_ptr<Work> allreduce(const TensorList& t, const AllreduceOptions& o) override;
  std::shared_ptr<Work> allreduce_coalesced(const TensorList& t,
                                            const AllreduceOptions& o) override;
  std::shared_ptr<Work> broadcast(const TensorList& t, const BroadcastOptions& o) override;
  std::shared_ptr<Work> reduce(const TensorList& t, const ReduceOptions& o) override;
  std::shared_ptr<Work> allgather(const std::vector<TensorList>& out, const TensorList& in,
                                  const AllgatherOptions& o) override;
  std::shared_ptr<Work> allgather_into_tensor(const Tensor& out, const Tensor& in,
                                              const AllgatherOptions& o) override;
  std::shared_ptr<Work> reduce_scatter(const TensorList& out,
                                       const std::vector<TensorList>& in,
                                       const ReduceScatterOptions& o) override;
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                              const ReduceScatterOptions& o) override;
  std::shared_ptr<Work> gather(const std::vector<TensorList>& out, const TensorList& in,
                               const GatherOptions& o) override;
  std::shared_ptr<Work> scatter(const TensorList& out, const std::vector<TensorList>& in,
                                const ScatterOptions& o) override;
  std::shared_ptr<Work> alltoall(const TensorList& out, const TensorList& in,
                                 const AllToAllOptions& o) override;
  std::shared_ptr<Work> alltoall_base(const Tensor& out, const Tensor& in,
                                      const std::vector<int64_t>& out_splits,
                                      const std::vector<int64_t>& in_splits,
                                      const AllToAllOptions& o) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& o) override;
  std::shared_ptr<Work> monitored_barrier(const BarrierOptions& o, bool wait_all) override;
  std::shared_ptr<Work> send(const TensorList& t, int dst, const SendRecvOptions& o) override {
    return inner_->send(t, dst, o);
  }
  std::shared_ptr<Work> recv(const TensorList& t, int src, const SendRecvOptions& o) override {
    return inner_->recv(t, src, o);
  }
  std::shared_ptr<Work> recv_anysource(const TensorList& t, const SendRecvOptions& o) override {
    return inner_->recv_anysource(t, o);
  }

 private:
  // Stamps the call now and the completion when `work`'s future completes.
  template <typename Call>
  std::shared_ptr<Work> stamped(Call call);

  // Shared with the completion callbacks, which may outlive this object.
  struct Stamps {
    std::mutex mu;
    uint64_t generation = 0;  // bumped by take_spans(); late stamps are dropped
    std::vector<CommSpan> spans;
  };

  std::shared_ptr<Backend> inner_;
  std::shared_ptr<Stamps> stamps_ = std::make_shared<Stamps>();
};

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_TIMED_BACKEND_H_
