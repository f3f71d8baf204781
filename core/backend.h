// What a communication backend (Gloo, NCCL, round-robin) implements.
//
// Backends may assume their input was validated by the ProcessGroup front end
// (dtypes, sizes, ranks, reduce ops) and that every op's timeout is set: the
// front end resolves kUseGroupTimeout, and a backend carries the value it
// gets with the op. (Called directly, without a front end, a backend applies
// the timeout it was created with to an unset one.) A transport that gives
// up waiting reports it as DeadlineExceeded, naming the op and the timeout.
// Every op returns at once with a Work; failures, including unsupported ops,
// arrive through that Work.
#ifndef DDPX_CORE_BACKEND_H_
#define DDPX_CORE_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/host_topology.h"
#include "core/options.h"
#include "core/tensor.h"
#include "core/work.h"

namespace ddpx {

class Backend {
 public:
  Backend(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "gloo", "nccl", "round_robin:gloo*2".
  virtual std::string name() const = 0;
  // Which ranks share a host, where the backend found out at rendezvous
  // (Gloo does); null where it did not.
  virtual const HostTopology* host_topology() const { return nullptr; }
  // Whether every op claims its flight-recorder entry (CurrentTrace::claim
  // or claim_deferred) before the call returns; the front end then leaves
  // the recording to the backend (flight_recorder.h, launch_traced).
  virtual bool claims_traces() const { return false; }
  // Fails every op still waiting on a peer, and every later one, with `why`
  // (which names the culprit, culprits.h); callable from any thread, and
  // the group is unusable afterwards. For a group being abandoned: an
  // elastic job's generation whose member stopped answering
  // (docs/elastic.md). A backend that cannot abort leaves its ops to end
  // at their timeout.
  virtual void abort(const absl::Status& why) { (void)why; }

  virtual std::shared_ptr<Work> allreduce(const TensorList& tensors,
                                          const AllreduceOptions& opts) = 0;
  // Reduces many tensors as one flat message.
  virtual std::shared_ptr<Work> allreduce_coalesced(
      const TensorList& tensors, const AllreduceOptions& opts) = 0;
  virtual std::shared_ptr<Work> broadcast(const TensorList& tensors,
                                          const BroadcastOptions& opts) = 0;
  virtual std::shared_ptr<Work> reduce(const TensorList& tensors,
                                       const ReduceOptions& opts) = 0;
  // outputs[i][r] receives rank r's inputs[i].
  virtual std::shared_ptr<Work> allgather(
      const std::vector<TensorList>& outputs, const TensorList& inputs,
      const AllgatherOptions& opts) = 0;
  // output holds size() * input.numel() elements, rank-major.
  virtual std::shared_ptr<Work> allgather_into_tensor(
      const Tensor& output, const Tensor& input, const AllgatherOptions& opts) = 0;
  // outputs[i] = reduction over ranks of their inputs[i][rank()].
  virtual std::shared_ptr<Work> reduce_scatter(
      const TensorList& outputs, const std::vector<TensorList>& inputs,
      const ReduceScatterOptions& opts) = 0;
  // input holds size() * output.numel() elements; this rank gets chunk rank().
  virtual std::shared_ptr<Work> reduce_scatter_tensor(
      const Tensor& output, const Tensor& input,
      const ReduceScatterOptions& opts) = 0;
  // On the root, outputs[0][r] receives rank r's inputs[0]; elsewhere
  // outputs is empty.
  virtual std::shared_ptr<Work> gather(const std::vector<TensorList>& outputs,
                                       const TensorList& inputs,
                                       const GatherOptions& opts) = 0;
  // On the root, inputs[0][r] goes to rank r's outputs[0].
  virtual std::shared_ptr<Work> scatter(const TensorList& outputs,
                                        const std::vector<TensorList>& inputs,
                                        const ScatterOptions& opts) = 0;
  // inputs[r] goes to rank r; outputs[r] comes from rank r.
  virtual std::shared_ptr<Work> alltoall(const TensorList& outputs,
                                         const TensorList& inputs,
                                         const AllToAllOptions& opts) = 0;
  // Split sizes count first-dimension rows; empty means equal splits.
  virtual std::shared_ptr<Work> alltoall_base(
      const Tensor& output, const Tensor& input,
      const std::vector<int64_t>& output_split_sizes,
      const std::vector<int64_t>& input_split_sizes,
      const AllToAllOptions& opts) = 0;
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& opts) = 0;
  // Like barrier, but a failure names the ranks that did not arrive
  // (all of them when wait_all_ranks, else the first).
  virtual std::shared_ptr<Work> monitored_barrier(const BarrierOptions& opts,
                                                  bool wait_all_ranks) = 0;
  virtual std::shared_ptr<Work> send(const TensorList& tensors, int dst_rank,
                                     const SendRecvOptions& opts) = 0;
  virtual std::shared_ptr<Work> recv(const TensorList& tensors, int src_rank,
                                     const SendRecvOptions& opts) = 0;
  virtual std::shared_ptr<Work> recv_anysource(const TensorList& tensors,
                                               const SendRecvOptions& opts) = 0;

 private:
  const int rank_;
  const int size_;
};

}  // namespace ddpx

#endif  // DDPX_CORE_BACKEND_H_
