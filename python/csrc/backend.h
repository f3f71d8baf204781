// The c10d::Backend that torch.distributed runs on for "ddpx": torch's
// verbs on CPU tensors, each handed to a ddpx::ProcessGroup (front end
// validation, flight recorder, timeouts) over ddpx's Gloo backend, which
// picks shared memory when every rank of the group is on one host, and TCP
// with the two-level allreduce between hosts, per group, from host
// identities exchanged through the group's store (docs/python.md).
//
// Every op returns a TorchWork (torch_work.h). Bad arguments raise from the
// call, naming the op; failures in flight arrive through the Work.
#ifndef DDPX_PYTHON_CSRC_BACKEND_H_
#define DDPX_PYTHON_CSRC_BACKEND_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "process_group/front_end/process_group.h"
#include "python/csrc/tensor_bridge.h"

namespace ddpx_torch {

struct BackendConfig {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{30 * 60 * 1000};
  // The group's ranks in the default group (the flight recorder names
  // culprits by them); empty: 0..size-1.
  std::vector<int> global_ranks;
  // The default group: ddpx's trace service (dumps to DDPX_TRACE_DIR, peer
  // reports) attaches to its store, as init_process_group does in C++.
  bool is_world = false;
  // torch's name for the group ("0", "1", or a hash): ddpx's messages and
  // dumps call the group "default_pg" or "group_<name>".
  std::string group_name;
  // ddpx backend spec ("gloo", "round_robin:gloo*2").
  std::string spec = "gloo";
};

class DdpxBackend : public c10d::Backend {
 public:
  // Rendezvous of one group through `store` (torch's PrefixStore for it).
  // Throws DistBackendError naming the group and what failed.
  static c10::intrusive_ptr<DdpxBackend> create(c10::intrusive_ptr<c10d::Store> store,
                                                const BackendConfig& config);
  DdpxBackend(const BackendConfig& config, std::shared_ptr<ddpx::ProcessGroup> group);
  ~DdpxBackend() override;

  // The ddpx group behind this backend (for C++ built on it: comm hooks).
  const std::shared_ptr<ddpx::ProcessGroup>& group() const { return group_; }
  const BackendConfig& config() const { return config_; }
  std::chrono::milliseconds group_timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
  }

  // The ddpx backend of the default group (init_process_group("ddpx") or
  // "cpu:ddpx,..."), while it lives; null otherwise.
  static c10::intrusive_ptr<DdpxBackend> world();

  // Moves on whenever a ddpx group is created or shut down: a backend found
  // by group name (or as the world) before may no longer be the one torch
  // gives that name, so lookups cached across calls are stale once it moved
  // (torch.ops.ddpx.all_reduce_, inference_all_reduce.cc).
  static uint64_t groups_generation();

  // One allreduce of `tensor` (one contiguous CPU tensor's memory), done when
  // this returns: ddpx's op and its wait on the calling thread, with the
  // group's timeout, no TorchWork and no future (torch.ops.ddpx.all_reduce_,
  // python/csrc/inference_all_reduce.cc). Throws what wait() would raise.
  void allreduce_now(const ddpx::TensorList& tensor, ddpx::ReduceOp op);

  const std::string getBackendName() const override { return "ddpx"; }
  // destroy_process_group shuts every group it destroys down: moves
  // groups_generation() on.
  void shutdown() override;
  // The ddpx group closes when the last strong reference goes, even while
  // weak ones remain (world(), the custom op's lookup caches): intrusive_ptr
  // frees the object only after its last weak reference.
  void release_resources() override;
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_split_sizes,
                                                   std::vector<int64_t>& input_split_sizes,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // One op in the making: its tensors staged for ddpx, its options, the
  // TorchWork it returns (backend.cc). Each op above says only what is its own.
  class Call;

  ddpx::OpTimeout op_timeout(std::chrono::milliseconds requested) const {
    return to_ddpx_timeout(requested, group_timeout());
  }

  // What the destructor would do, done once: release_resources() or the
  // destructor, whichever comes first.
  void close();

  const BackendConfig config_;
  std::shared_ptr<ddpx::ProcessGroup> group_;
  std::atomic<int64_t> timeout_ms_;
  std::atomic<uint64_t> sequence_{0};
};

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_BACKEND_H_
