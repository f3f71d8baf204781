// A backend that spreads collectives over N backends of the same group
// (torch's _round_robin_process_groups): collective k goes to backend k % N,
// so consecutive collectives can overlap on independent connections.
//
// Every rank must issue collectives in the same order (as with any backend),
// so all ranks pick the same backend for the same collective. Point-to-point
// ops are refused: their matching across ranks would depend on which backend
// each side happened to pick.
#ifndef DDPX_PROCESS_GROUP_ROUND_ROBIN_H_
#define DDPX_PROCESS_GROUP_ROUND_ROBIN_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"

namespace ddpx {

class RoundRobinBackend : public Backend {
 public:
  // Fails unless `backends` is non-empty and all share one rank and size.
  static absl::StatusOr<std::shared_ptr<RoundRobinBackend>> create(
      std::vector<std::shared_ptr<Backend>> backends);

  // "round_robin:gloo*2" when all are alike, else "round_robin:gloo,nccl".
  std::string name() const override;
  // The members share ranks, so they share hosts: the first one's view.
  const HostTopology* host_topology() const override { return backends_[0]->host_topology(); }
  const std::vector<std::shared_ptr<Backend>>& backends() const { return backends_; }
  // How many collectives were sent to backends()[i] so far.
  uint64_t dispatched(size_t i) const { return dispatched_[i]->load(); }

  std::shared_ptr<Work> allreduce(const TensorList& tensors,
                                  const AllreduceOptions& opts) override;
  std::shared_ptr<Work> allreduce_coalesced(const TensorList& tensors,
                                            const AllreduceOptions& opts) override;
  std::shared_ptr<Work> broadcast(const TensorList& tensors,
                                  const BroadcastOptions& opts) override;
  std::shared_ptr<Work> reduce(const TensorList& tensors,
                               const ReduceOptions& opts) override;
  std::shared_ptr<Work> allgather(const std::vector<TensorList>& outputs,
                                  const TensorList& inputs,
                                  const AllgatherOptions& opts) override;
  std::shared_ptr<Work> allgather_into_tensor(const Tensor& output,
                                              const Tensor& input,
                                              const AllgatherOptions& opts) override;
  std::shared_ptr<Work> reduce_scatter(const TensorList& outputs,
                                       const std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& opts) override;
  std::shared_ptr<Work> reduce_scatter_tensor(
      const Tensor& output, const Tensor& input,
      const ReduceScatterOptions& opts) override;
  std::shared_ptr<Work> gather(const std::vector<TensorList>& outputs,
                               const TensorList& inputs,
                               const GatherOptions& opts) override;
  std::shared_ptr<Work> scatter(const TensorList& outputs,
                                const std::vector<TensorList>& inputs,
                                const ScatterOptions& opts) override;
  std::shared_ptr<Work> alltoall(const TensorList& outputs,
                                 const TensorList& inputs,
                                 const AllToAllOptions& opts) override;
  std::shared_ptr<Work> alltoall_base(
      const Tensor& output, const Tensor& input,
      const std::vector<int64_t>& output_split_sizes,
      const std::vector<int64_t>& input_split_sizes,
      const AllToAllOptions& opts) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& opts) override;
  std::shared_ptr<Work> monitored_barrier(const BarrierOptions& opts,
                                          bool wait_all_ranks) override;
  std::shared_ptr<Work> send(const TensorList& tensors, int dst_rank,
                             const SendRecvOptions& opts) override;
  std::shared_ptr<Work> recv(const TensorList& tensors, int src_rank,
                             const SendRecvOptions& opts) override;
  std::shared_ptr<Work> recv_anysource(const TensorList& tensors,
                                       const SendRecvOptions& opts) override;

 private:
  explicit RoundRobinBackend(std::vector<std::shared_ptr<Backend>> backends);
  // The backend for the next collective.
  Backend& next();
  std::shared_ptr<Work> refuse(OpType op) const;

  std::vector<std::shared_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> dispatched_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_ROUND_ROBIN_H_
