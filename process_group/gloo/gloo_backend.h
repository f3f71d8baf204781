// The Gloo backend: CPU collectives between processes over TCP, built on
// Debian's libgloo (0.5.0).
//
//   auto backend = GlooBackend::create(store, rank, size,
//                                      std::chrono::seconds(30)).value();
//   backend->allreduce({t}, {})->wait();
//
// Rendezvous goes through our Store (adapted to gloo::rendezvous::Store).
// Each op is queued on one of `num_workers` threads chosen by its sequence
// number; each worker owns a Gloo context (its own full mesh of TCP pairs)
// and every op gets a fresh tag, so concurrent ops never cross. Point-to-
// point ops use one more context of their own, with the user's tag as slot.
// Small classic ops use a second context per worker whose sockets the op's
// thread reads itself (sync_pairs.h). When every rank is on one host, each
// worker also has a shared-memory channel (process_group/shm/). Which of
// these an op takes is the group's execution plan (execution_plan.h), made
// when the group forms; CollectiveRunner runs it. This class keeps the
// rendezvous, the op queue and the naming of errors.
#ifndef DDPX_PROCESS_GROUP_GLOO_GLOO_BACKEND_H_
#define DDPX_PROCESS_GROUP_GLOO_GLOO_BACKEND_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "process_group/gloo/abortable_sockets.h"
#include "process_group/gloo/collective_runner.h"
#include "process_group/gloo/execution_plan.h"
#include "process_group/gloo/gloo_options.h"
#include "process_group/gloo/op_context.h"
#include "process_group/gloo/p2p_waiters.h"
#include "process_group/gloo/worker_pool.h"
#include "process_group/rendezvous/host_identity.h"
#include "process_group/shm/collectives.h"
#include "process_group/shm/shm_group.h"
#include "store/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace ddpx {

class TensorSummary;  // gloo_internal.h

class TwoLevelAllreduce;

class GlooBackend : public Backend {
 public:
  // Connects to the other `size - 1` ranks through `store` (every rank calls
  // this with the same size). `timeout` is the default of every op and of the
  // rendezvous itself.
  static absl::StatusOr<std::shared_ptr<GlooBackend>> create(
      std::shared_ptr<Store> store, int rank, int size,
      std::chrono::milliseconds timeout, const GlooOptions& options);
  ~GlooBackend() override;

  std::string name() const override { return "gloo"; }
  const GlooOptions& options() const { return options_; }
  // The address the TCP device bound ("127.0.0.1", "eth0 (10.0.0.2)").
  std::string device_description() const;
  // What the sync pairs may carry, agreed by all ranks at rendezvous
  // (sync_pairs.h; zeros when sync_max_bytes is 0 or on one rank).
  const SyncPairLimits& sync_limits() const { return sync_limits_; }
  // Whether the shared-memory path is on for this group, and if not, why
  // (off by option, ranks on several hosts, or the setup error).
  bool uses_shared_memory() const { return shm_ != nullptr; }
  // Which ranks share a host (from every rank's host identity).
  const HostTopology* host_topology() const override { return &topology_; }
  bool claims_traces() const override { return true; }
  // Whether large allreduces take two levels across hosts (GlooOptions).
  bool uses_two_level_allreduce() const { return !two_level_.empty(); }
  // Which path each collective takes in this group (execution_plan.h),
  // chosen when the group formed.
  const ExecutionPlan& execution_plan() const { return *plan_; }
  const std::string& shared_memory_status() const { return shm_status_; }
  // Ends the ops waiting on a peer at once: the shared-memory waiters give
  // up at their next look (AbortSignal), the TCP pairs' sockets are shut
  // down (abortable_sockets.h); each op fails with `why` after its own
  // name. The group is unusable afterwards.
  void abort(const absl::Status& why) override;

  std::shared_ptr<Work> allreduce(const TensorList& tensors,
                                  const AllreduceOptions& opts) override;
  std::shared_ptr<Work> allreduce_coalesced(
      const TensorList& tensors, const AllreduceOptions& opts) override;
  std::shared_ptr<Work> broadcast(const TensorList& tensors,
                                  const BroadcastOptions& opts) override;
  std::shared_ptr<Work> reduce(const TensorList& tensors,
                               const ReduceOptions& opts) override;
  std::shared_ptr<Work> allgather(const std::vector<TensorList>& outputs,
                                  const TensorList& inputs,
                                  const AllgatherOptions& opts) override;
  std::shared_ptr<Work> allgather_into_tensor(
      const Tensor& output, const Tensor& input,
      const AllgatherOptions& opts) override;
  std::shared_ptr<Work> reduce_scatter(
      const TensorList& outputs, const std::vector<TensorList>& inputs,
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
  static constexpr uint32_t kTagsPerOp = OpContext::kTagsPerOp;
  // How long the destructor waits for the peers' closing handshake, and how
  // long the connections then stay open in the background for it.
  static constexpr std::chrono::milliseconds kClosingGrace{200};
  static constexpr std::chrono::milliseconds kClosingLimit{10000};
  using OpBody = std::function<absl::StatusOr<TensorList>(const OpContext&)>;

  GlooBackend(std::shared_ptr<Store> store, int rank, int size,
              std::chrono::milliseconds timeout, GlooOptions options);
  absl::Status connect();
  // Sets up shm_ when every rank shares this host and shared memory is on;
  // otherwise (or when setup fails on any rank) every rank stays on TCP,
  // and shm_status_ says why. Collective; called from connect().
  void set_up_shared_memory();
  // Builds two_level_ (per worker: this host's group and the cross-host
  // group of this local rank) where GlooOptions and the topology call for
  // it. Collective; called from connect().
  void set_up_two_level_allreduce();

  // Queues `body` on the worker its sequence number picks; `what` describes
  // the op's tensors for its error messages. `match` (match_key) is what
  // every rank's call must agree on; it goes into the op's tags.
  std::shared_ptr<Work> enqueue(OpType op, const TensorSummary& what, const OpTimeout& timeout,
                                OpBody body, uint32_t match = 0);
  // A small single-tensor allreduce on the shared-memory path, begun on the
  // calling thread when its worker is idle with nothing queued (most ops are
  // waited for at once, and this one costs no queueing, no task and no
  // hand-off): finished here when the peers have posted within the wait
  // policy's spin, else handed to the worker as its next task, so issuing
  // never waits for peers that have not issued their op. Null when it does
  // not apply (allreduce_here.cc).
  std::shared_ptr<Work> small_allreduce_here(const TensorList& tensors,
                                             const AllreduceOptions& opts);
  // An error already decided where it was raised (the shared-memory path's
  // DeadlineExceeded names the timeout and the rank waited for), with the op,
  // its tensors and this rank in front and its culprits kept.
  absl::Status decided_error(OpType op, const TensorSummary& what,
                             const absl::Status& cause) const;
  // The first of op `seq`'s kTagsPerOp tags, with 8 bits of `match` on top:
  // ranks that call an op of another size, dtype or root then wait for
  // different slots and time out naming the op, instead of mixing the data
  // or making Gloo's reader thread abort the process on a message of
  // another length.
  static uint32_t tag_of(uint64_t seq, uint32_t match) {
    return ((match & 0xffu) << 24) | static_cast<uint32_t>((seq * kTagsPerOp) & 0xffffffu);
  }
  // A hash of what an allreduce, broadcast or reduce must agree on: the
  // bytes that cross between ranks, their dtype, the root.
  static uint32_t match_key(uint64_t bytes, DType dtype, int root);
  // The op's timeout as the front end resolved it, or for a direct call
  // that left it unset, the one this backend was created with.
  std::chrono::milliseconds op_timeout(const OpTimeout& timeout) const {
    return timeout.value_or(timeout_);
  }
  // The error for a Gloo exception raised by an op that began at `started`:
  // names the op, the rank, the timeout and Gloo's cause (which names the
  // peer). Every wait of an op on Gloo is bounded by the op's timeout (the
  // unbound buffers' waits take it, the sync pairs' sockets are given it),
  // and Gloo tells a timeout only in words: an exception once the timeout
  // has passed is the op's timeout (DeadlineExceeded), one before it a
  // failure (Unavailable: a peer closed or reset the connection).
  absl::Status op_error(OpType op, const std::string& what, std::chrono::milliseconds timeout,
                        std::chrono::steady_clock::time_point started,
                        const std::string& cause) const;

  // Sets the culprits (culprits.h) of a failed op from what its contexts'
  // TCP pairs say and the peer Gloo's message names.
  static void name_transport_culprits(const OpContext& c, const std::string& cause,
                                      absl::Status* error);

  absl::StatusOr<TensorList> monitored_barrier_on_worker(
      const OpContext& c, bool wait_all_ranks) const;
  std::shared_ptr<Work> start_p2p(OpType op, const TensorList& tensors,
                                  std::vector<int> peers, int tag, const OpTimeout& timeout);

  const std::shared_ptr<Store> store_;
  // Given at creation: the rendezvous's timeout (and its contexts' pairs'
  // initial one), the closing handshake's bound, and an op's where a direct
  // caller left it unset.
  const std::chrono::milliseconds timeout_;
  const GlooOptions options_;
  std::string key_prefix_;  // this backend instance's keys in the store
  std::string bound_host_;

  std::shared_ptr<gloo::transport::Device> device_;
  std::vector<std::shared_ptr<gloo::Context>> worker_contexts_;
  std::vector<std::shared_ptr<gloo::Context>> worker_sync_contexts_;  // may be empty
  // Per worker: the timeout its sync context's sockets have (OpContext).
  std::vector<std::chrono::milliseconds> worker_sync_timeouts_;
  SyncPairLimits sync_limits_;
  std::vector<std::unique_ptr<Store>> worker_stores_;
  std::vector<Tensor> worker_scratch_;  // used only by its worker
  // Per worker: the Work of the latest small allreduce that completed where
  // it was issued, handed out again (CompletedWork::reuse_for) once its
  // caller let go of it; used only by the thread holding that worker's
  // claim (small_allreduce_here).
  std::vector<std::shared_ptr<CompletedWork>> completed_here_;
  std::shared_ptr<gloo::Context> p2p_context_;
  std::unique_ptr<shm::ShmGroup> shm_;
  std::string shm_status_;
  HostTopology topology_;
  std::vector<std::unique_ptr<TwoLevelAllreduce>> two_level_;  // per worker, or empty
  // Set when the group has formed (end of connect()).
  std::unique_ptr<ExecutionPlan> plan_;
  std::unique_ptr<CollectiveRunner> runner_;

  std::atomic<bool> op_failed_{false};  // some collective failed (not cancelled)
  // abort(): whether it was called, and why (under abort_mu_).
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;
  absl::Status abort_why_;
  AbortableSockets sockets_;  // every TCP pair's, recorded by connect()
  std::mutex seq_mu_;
  uint64_t next_seq_ = 0;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<P2PWaiters> p2p_waiters_;
};

// The factory init_process_group registers under "gloo": options from the
// environment (DDPX_GLOO_SOCKET_IFNAME, DDPX_GLOO_HOSTNAME, ...).
absl::StatusOr<std::shared_ptr<Backend>> create_gloo_backend(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_GLOO_BACKEND_H_
