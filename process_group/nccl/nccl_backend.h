// The nccl backend: collectives and point-to-point ops on CUDA tensors
// through NCCL, one communicator per device set (lazily created, cached),
// a two-rank communicator per point-to-point pair, and a watchdog that
// aborts the communicators on timeouts and asynchronous errors.
//
// Ops are enqueued on the communicator's stream after the caller's current
// stream (cuda/stream.h) has reached the op, and return at once.
// Bookkeeping lives in plain C++ (comm_plan, nccl_types, alltoall_plan,
// nccl_options, watchdog) tested on the CPU.
#ifndef DDPX_PROCESS_GROUP_NCCL_NCCL_BACKEND_H_
#define DDPX_PROCESS_GROUP_NCCL_NCCL_BACKEND_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "process_group/nccl/comm_plan.h"
#include "process_group/nccl/nccl_comm.h"
#include "process_group/nccl/nccl_options.h"
#include "process_group/nccl/watchdog.h"
#include "store/store.h"

namespace ddpx {
namespace nccl {

class NcclBackend : public Backend {
 public:
  static absl::StatusOr<std::shared_ptr<NcclBackend>> create(std::shared_ptr<Store> store,
                                                             int rank, int size,
                                                             NcclOptions options);
  ~NcclBackend() override;

  std::string name() const override { return "nccl"; }

  std::shared_ptr<Work> allreduce(const TensorList& tensors,
                                  const AllreduceOptions& opts) override;
  std::shared_ptr<Work> allreduce_coalesced(const TensorList& tensors,
                                            const AllreduceOptions& opts) override;
  std::shared_ptr<Work> broadcast(const TensorList& tensors,
                                  const BroadcastOptions& opts) override;
  std::shared_ptr<Work> reduce(const TensorList& tensors, const ReduceOptions& opts) override;
  std::shared_ptr<Work> allgather(const std::vector<TensorList>& outputs,
                                  const TensorList& inputs,
                                  const AllgatherOptions& opts) override;
  std::shared_ptr<Work> allgather_into_tensor(const Tensor& output, const Tensor& input,
                                              const AllgatherOptions& opts) override;
  std::shared_ptr<Work> reduce_scatter(const TensorList& outputs,
                                       const std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& opts) override;
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                              const ReduceScatterOptions& opts) override;
  std::shared_ptr<Work> gather(const std::vector<TensorList>& outputs,
                               const TensorList& inputs, const GatherOptions& opts) override;
  std::shared_ptr<Work> scatter(const TensorList& outputs,
                                const std::vector<TensorList>& inputs,
                                const ScatterOptions& opts) override;
  std::shared_ptr<Work> alltoall(const TensorList& outputs, const TensorList& inputs,
                                 const AllToAllOptions& opts) override;
  std::shared_ptr<Work> alltoall_base(const Tensor& output, const Tensor& input,
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

  // How many communicators exist (for tests: created lazily, then reused).
  size_t communicator_count() const;

 private:
  NcclBackend(std::shared_ptr<Store> store, int rank, int size, NcclOptions options);

  // What an op does on device i of its communicator, in three phases so
  // that copies stay outside the NCCL group: before (packing inputs), nccl
  // (the NCCL calls; run between ncclGroupStart and ncclGroupEnd), after
  // (unpacking outputs). All run on the communicator's stream.
  struct Launch {
    std::function<absl::Status(size_t i, cudaStream_t)> before;
    std::function<absl::Status(size_t i, NcclComm&, cudaStream_t)> nccl;
    std::function<absl::Status(size_t i, cudaStream_t)> after;
  };
  std::shared_ptr<Work> run(OpType op, const CommPlan& plan, const DeviceSet& devices,
                            TensorList in_use, TensorList outputs,
                            const OpTimeout& timeout, const Launch& launch,
                            bool blocking_wait = false);
  absl::StatusOr<std::shared_ptr<NcclComm>> communicator(const CommPlan& plan,
                                                         const DeviceSet& devices);
  // The front end's timeout, or for a direct call that left it unset,
  // NcclOptions::timeout.
  std::chrono::milliseconds op_timeout(const OpTimeout& timeout) const;
  std::shared_ptr<Work> point_to_point(OpType op, const TensorList& tensors, int peer,
                                       const OpTimeout& timeout);

  const std::shared_ptr<Store> store_;
  const NcclOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<NcclComm>> comms_;
  std::map<std::string, int64_t> generations_;  // per point-to-point pair
  int64_t collectives_created_ = 0;             // names collective rendezvous
  int last_device_ = -1;  // for barrier
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_NCCL_BACKEND_H_
