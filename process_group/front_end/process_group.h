// The collective API users call: torch.distributed's verbs on one group.
//
// ProcessGroup validates every call (dtypes, element counts, devices, ranks,
// reduce ops: errors name what was expected and what came), resolves the
// group's default timeout, checks collectives across ranks in debug mode
// (DDPX_DISTRIBUTED_DEBUG=DETAIL), counts payload bytes, and hands the op to
// its Backend. Every op returns a Work at once; bad input gives a Work that
// has already failed.
//
//   auto pg = ddpx::init_process_group({.backend = "gloo", ...}).value();
//   TensorList t = {grad};
//   pg->allreduce(t)->get_future()->then([](TensorList& r) { ... });
#ifndef DDPX_PROCESS_GROUP_FRONT_END_PROCESS_GROUP_H_
#define DDPX_PROCESS_GROUP_FRONT_END_PROCESS_GROUP_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "process_group/tracing/flight_recorder.h"
#include "core/options.h"
#include "core/tensor.h"
#include "core/work.h"
#include "store/store.h"

namespace ddpx {

class CollectiveFingerprint;
class DebugChecker;

// Bytes this rank handed to collectives as input (its own payload), summed.
struct CommCounters {
  std::atomic<uint64_t> payload_bytes{0};
  std::atomic<uint64_t> ops{0};
};

class ProcessGroup {
 public:
  ProcessGroup(std::shared_ptr<Backend> backend, std::shared_ptr<Store> store,
               std::chrono::milliseconds timeout);
  ~ProcessGroup();

  int rank() const { return backend_->rank(); }
  int size() const { return backend_->size(); }
  std::string backend_name() const { return backend_->name(); }
  const std::shared_ptr<Backend>& backend() const { return backend_; }
  // Which ranks share a host, where the backend knows (Backend::host_topology).
  const HostTopology* host_topology() const { return backend_->host_topology(); }
  // The group's store (already prefixed for this group).
  const std::shared_ptr<Store>& store() const { return store_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const CommCounters& counters() const { return counters_; }
  // Whether collectives are cross-checked between ranks first (debug mode,
  // from DDPX_DISTRIBUTED_DEBUG=DETAIL when the group was built).
  bool debug_detail() const { return debug_ != nullptr; }
  // This group's row in the flight recorder (flight_recorder.h); shared by
  // every ProcessGroup built over the same store object.
  const TraceGroup& trace_group() const { return *trace_; }

  // For what is built on top of this group once and lives as long as it
  // (host_subgroups() in init.h keeps its subgroups here): the first call
  // with `key` runs `build` and keeps an OK result, later calls return that.
  // Calls wait for each other; a failed build is not kept.
  absl::StatusOr<std::shared_ptr<const void>> memoize(
      const std::string& key,
      const std::function<absl::StatusOr<std::shared_ptr<const void>>()>& build);

  std::shared_ptr<Work> allreduce(const TensorList& tensors,
                                  const AllreduceOptions& opts = {});
  std::shared_ptr<Work> allreduce_coalesced(const TensorList& tensors,
                                            const AllreduceOptions& opts = {});
  std::shared_ptr<Work> broadcast(const TensorList& tensors,
                                  const BroadcastOptions& opts = {});
  std::shared_ptr<Work> reduce(const TensorList& tensors,
                               const ReduceOptions& opts = {});
  std::shared_ptr<Work> allgather(const std::vector<TensorList>& outputs,
                                  const TensorList& inputs,
                                  const AllgatherOptions& opts = {});
  std::shared_ptr<Work> allgather_into_tensor(const Tensor& output,
                                              const Tensor& input,
                                              const AllgatherOptions& opts = {});
  std::shared_ptr<Work> reduce_scatter(const TensorList& outputs,
                                       const std::vector<TensorList>& inputs,
                                       const ReduceScatterOptions& opts = {});
  std::shared_ptr<Work> reduce_scatter_tensor(
      const Tensor& output, const Tensor& input,
      const ReduceScatterOptions& opts = {});
  std::shared_ptr<Work> gather(const std::vector<TensorList>& outputs,
                               const TensorList& inputs,
                               const GatherOptions& opts = {});
  std::shared_ptr<Work> scatter(const TensorList& outputs,
                                const std::vector<TensorList>& inputs,
                                const ScatterOptions& opts = {});
  std::shared_ptr<Work> alltoall(const TensorList& outputs,
                                 const TensorList& inputs,
                                 const AllToAllOptions& opts = {});
  std::shared_ptr<Work> alltoall_base(
      const Tensor& output, const Tensor& input,
      const std::vector<int64_t>& output_split_sizes = {},
      const std::vector<int64_t>& input_split_sizes = {},
      const AllToAllOptions& opts = {});
  std::shared_ptr<Work> barrier(const BarrierOptions& opts = {});
  std::shared_ptr<Work> monitored_barrier(const BarrierOptions& opts = {},
                                          bool wait_all_ranks = false);
  std::shared_ptr<Work> send(const TensorList& tensors, int dst_rank,
                             const SendRecvOptions& opts = {});
  std::shared_ptr<Work> recv(const TensorList& tensors, int src_rank,
                             const SendRecvOptions& opts = {});
  std::shared_ptr<Work> recv_anysource(const TensorList& tensors,
                                       const SendRecvOptions& opts = {});

 private:
  // kUseGroupTimeout -> the group's timeout; the one place it is resolved.
  std::chrono::milliseconds resolve(const OpTimeout& timeout) const;
  // Validation error, then debug-mode cross-check; OK means "go ahead", and
  // the payload is counted.
  // Point-to-point ops are not cross-checked (their fingerprint only feeds
  // the flight recorder).
  absl::Status admit(absl::Status valid,
                     const CollectiveFingerprint* fingerprint,
                     std::chrono::milliseconds timeout, uint64_t payload_bytes);

  // The shape of every op: resolve the timeout, admit (or fail the Work),
  // then launch(options with the resolved timeout) on the backend.
  template <typename Options, typename Launch>
  std::shared_ptr<Work> dispatch(OpType op, Options opts, absl::Status valid,
                                 const CollectiveFingerprint* fingerprint,
                                 uint64_t payload_bytes, Launch launch);

  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Store> store_;
  std::chrono::milliseconds timeout_;
  CommCounters counters_;
  std::unique_ptr<DebugChecker> debug_;  // null unless debug mode
  // memoize()'s; released before the backend (declared after it).
  std::mutex memo_mu_;
  std::map<std::string, std::shared_ptr<const void>> memo_;
  std::shared_ptr<TraceGroup> trace_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_FRONT_END_PROCESS_GROUP_H_
