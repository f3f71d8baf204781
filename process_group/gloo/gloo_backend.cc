// GlooBackend: rendezvous, the op queue, error reporting, and the allreduce
// family. The other collectives are in gloo_collectives.cc, point-to-point
// ops and monitored_barrier in gloo_p2p.cc.
#include "process_group/gloo/gloo_backend.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce_ring.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "core/culprits.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/gloo/allreduce_algorithms.h"
#include "process_group/gloo/closing_handshake.h"
#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/reduce_kernels.h"
#include "process_group/gloo/send_buffer_autotuning.h"
#include "process_group/gloo/store_adapter.h"
#include "process_group/gloo/sync_collectives.h"
#include "process_group/gloo/sync_pairs.h"
#include "process_group/gloo/tcp_pair_access.h"
#include "process_group/gloo/two_level_allreduce.h"
#include "process_group/rendezvous/host_identity.h"
#include "process_group/gloo/network_interfaces.h"
#include "process_group/gloo/gloo_work.h"
#include "process_group/shm/collectives.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace {

void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<GlooBackend>> GlooBackend::create(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout, const GlooOptions& options) {
  if (store == nullptr) return absl::InvalidArgumentError("gloo: store is null");
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", rank, " is not in [0, ", size, ") (size ", size, ")"));
  }
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: timeout must be positive, got ", timeout.count(), " ms"));
  }
  // Gloo writes with writev(), so a peer that closed its end raises SIGPIPE,
  // which by default kills the whole process instead of failing the op with
  // a clear error. Like Python (which torch runs under) and many network
  // libraries, ignore it, unless the program installed its own handling.
  ignore_sigpipe_unless_handled();
  if (!options.interface.empty()) {
    absl::StatusOr<std::string> address = interface_address(options.interface);
    if (!address.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gloo: ", address.status().message(),
          " (set by GlooOptions::interface, DDPX_GLOO_SOCKET_IFNAME or GLOO_SOCKET_IFNAME)"));
    }
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: num_workers must be >= 1, got ", options.num_workers));
  }
  if (options.sync_max_bytes > kSyncPairMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: sync_max_bytes must be at most ", kSyncPairMaxMessageBytes,
        " (a quarter of the send buffer a sync pair asks for; a larger blocking "
        "write could deadlock a step), got ", options.sync_max_bytes));
  }
  std::shared_ptr<GlooBackend> backend(
      new GlooBackend(std::move(store), rank, size, timeout, options));
  absl::Status s = backend->connect();
  if (!s.ok()) return s;
  return backend;
}

GlooBackend::GlooBackend(std::shared_ptr<Store> store, int rank, int size,
                         std::chrono::milliseconds timeout, GlooOptions options)
    : Backend(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      options_(std::move(options)) {}

GlooBackend::~GlooBackend() {
  // Queued ops are cancelled, running ones finish (or time out) first; the
  // contexts they use are released only after that.
  if (pool_ != nullptr) pool_->shutdown();
  p2p_waiters_.reset();
  if (p2p_context_ == nullptr) return;  // never connected
  // After a failed op the pairs may be broken (Gloo closes a pair on a
  // protocol error): the peers are failing anyway, and writing to a closed
  // pair is what the handshake must not do.
  if (op_failed_.load()) return;
  // Peers may still be finishing their last op with this rank: close the
  // connections only once they said they are done (closing_handshake.h).
  std::vector<std::shared_ptr<void>> connections(worker_contexts_.begin(),
                                                 worker_contexts_.end());
  connections.insert(connections.end(), worker_sync_contexts_.begin(),
                     worker_sync_contexts_.end());
  connections.push_back(device_);
  close_after_peers(std::move(p2p_context_), std::move(connections),
                    std::min(timeout_, kClosingGrace),
                    std::min(timeout_, kClosingLimit));
}

absl::Status GlooBackend::connect() {
  // Each backend built on this store gets its own key space, so groups (and
  // round_robin's several gloo backends) can share one store, provided every
  // rank builds them in the same order.
  absl::StatusOr<int64_t> instance =
      store_->add(absl::StrCat("gloo/instances/rank", rank()), 1);
  if (!instance.ok()) return instance.status();
  key_prefix_ = absl::StrCat("gloo/", *instance, "/");

  gloo::transport::tcp::attr attr;
  if (!options_.interface.empty()) {
    attr.iface = options_.interface;
    bound_host_ = options_.interface;
  } else {
    attr.hostname =
        options_.hostname.empty() ? default_gloo_hostname() : options_.hostname;
    bound_host_ = attr.hostname;
  }
  // The workers', point-to-point, then the workers' sync ones (if any).
  const int num_sync = options_.sync_max_bytes > 0 ? options_.num_workers : 0;
  const int num_contexts = options_.num_workers + 1 + num_sync;
  std::string stage = "creating the TCP device";
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
    for (int k = 0; k < num_contexts; ++k) {
      stage = absl::StrCat("connecting context ", k, " of ", num_contexts);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank(), size());
      context->setTimeout(timeout_);
      PrefixStore context_store(absl::StrCat(key_prefix_, "ctx", k), store_);
      GlooStoreAdapter adapter(context_store);
      context->connectFullMesh(adapter, device_);
      if (k > options_.num_workers) {
        // Sync pairs size their send buffers themselves (sync_pairs.h);
        // the autotuning fix below is for the unbound ops they never carry.
        read_pairs_on_calling_thread(*context);
        worker_sync_contexts_.push_back(std::move(context));
        worker_sync_timeouts_.push_back(timeout_);  // the pairs' sockets got it
        continue;
      }
      // Before any op: a classic algorithm's first small message must not
      // pin the pairs' send buffers (see send_buffer_autotuning.h).
      keep_send_buffer_autotuning(*context);
      if (k < options_.num_workers) {
        worker_contexts_.push_back(std::move(context));
      } else {
        p2p_context_ = std::move(context);
      }
    }
    // Every rank is connected on every context before anyone returns: a
    // rank that creates the backend and destroys it at once must not tear
    // down pairs a peer is still connecting.
    if (!worker_sync_contexts_.empty()) {
      stage = "agreeing on the sync pairs' send buffers";
      sync_limits_ = agree_on_sync_limits(worker_sync_contexts_, options_.sync_max_bytes);
    }
    topology_.ranks_by_host = {{0}};
    if (size() > 1) {
      stage = "exchanging host identities";
      absl::StatusOr<std::vector<std::string>> hosts = exchange_host_identities(
          *store_, key_prefix_ + "host/", rank(), size(),
          options_.host_identity.empty() ? host_identity() : options_.host_identity);
      if (!hosts.ok()) throw std::runtime_error(hosts.status().ToString());
      topology_ = ddpx::host_topology(*hosts, rank());
    }
    stage = "setting up shared memory";
    set_up_shared_memory();
    stage = "setting up the two-level allreduce";
    set_up_two_level_allreduce();
    stage = "the closing barrier of the rendezvous";
    gloo::BarrierOptions done(p2p_context_);
    done.setTimeout(timeout_);
    gloo::barrier(done);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "gloo: rendezvous of rank ", rank(), " of ", size(), " on '",
        bound_host_, "' failed while ", stage, " (timeout ", timeout_.count(),
        " ms): ", e.what()));
  }
  for (int k = 0; k < options_.num_workers; ++k) {
    absl::StatusOr<std::unique_ptr<Store>> clone = store_->clone();
    if (!clone.ok()) return clone.status();
    worker_stores_.push_back(std::move(*clone));
  }
  worker_scratch_.resize(options_.num_workers);
  pool_ = std::make_unique<WorkerPool>(options_.num_workers);
  p2p_waiters_ = std::make_unique<P2PWaiters>();
  return absl::OkStatus();
}

void GlooBackend::set_up_shared_memory() {
  if (!options_.shared_memory) {
    shm_status_ = "off (GlooOptions::shared_memory or DDPX_SHM=0)";
    return;
  }
  if (size() == 1) {
    shm_status_ = "off (one rank)";
    return;
  }
  // Every rank reaches the same verdict from the same identities.
  if (topology_.host_count > 1) {
    shm_status_ = "off (the ranks are on more than one host)";
    return;
  }
  shm::ShmOptions o;
  o.num_channels = options_.num_workers;
  o.num_slots = options_.shm_slots;
  o.slot_bytes = options_.shm_slot_bytes;
  auto all_agree = [this](bool ok) {
    int64_t value = ok ? 1 : 0;
    std::vector<int64_t*> buffer = {&value};
    gloo::AllreduceRing<int64_t>(p2p_context_, buffer, 1,
                                 gloo::ReductionFunction<int64_t>::min)
        .run();
    return value == 1;
  };
  absl::StatusOr<std::unique_ptr<shm::ShmGroup>> group =
      shm::ShmGroup::create(*store_, key_prefix_, rank(), size(), o, all_agree);
  if (!group.ok()) {
    shm_status_ = absl::StrCat("off (setup failed: ", group.status().message(), ")");
    fprintf(stderr,
            "ddpx: warning: rank %d of %d: the ranks share a host but shared memory could not "
            "be set up, so this group uses TCP: %s\n",
            rank(), size(), std::string(group.status().message()).c_str());
    return;
  }
  shm_ = std::move(*group);
  shm_status_ = "on";
}

void GlooBackend::set_up_two_level_allreduce() {
  const HostTopology& t = topology_;
  if (!options_.two_level_allreduce || t.host_count == 1 || t.host_count == size()) return;
  if (!t.uniform()) {
    if (rank() == 0) {
      fprintf(stderr,
              "ddpx: rank 0 of %d: the hosts have different numbers of ranks, so allreduces "
              "across them stay flat (not in two levels)\n",
              size());
    }
    return;
  }
  GlooOptions sub = options_;
  sub.num_workers = 1;
  sub.two_level_allreduce = false;
  for (int w = 0; w < options_.num_workers; ++w) {
    // Disjoint groups, built in the same order on every rank.
    auto build = [&](const std::string& name, int sub_rank, int sub_size) {
      auto prefixed = std::make_shared<PrefixStore>(
          absl::StrCat(key_prefix_, "two_level/w", w, "/", name, "/"), store_);
      absl::StatusOr<std::shared_ptr<GlooBackend>> b =
          GlooBackend::create(prefixed, sub_rank, sub_size, timeout_, sub);
      if (!b.ok()) throw std::runtime_error(b.status().ToString());
      return *b;
    };
    auto local = build(absl::StrCat("host", t.host_index), t.local_rank, t.local_size);
    // Across hosts a ring: every host's uplink carries 2(H-1)/H of the
    // slice, the least possible; halving-doubling on a host count that is
    // no power of two loads some links half again as much.
    sub.allreduce_algorithm = AllreduceAlgorithm::kGlooRing4M;
    auto cross = build(absl::StrCat("cross", t.local_rank), t.host_index, t.host_count);
    sub.allreduce_algorithm = options_.allreduce_algorithm;
    two_level_.push_back(std::make_unique<TwoLevelAllreduce>(std::move(local), std::move(cross)));
  }
  if (rank() == 0) {
    fprintf(stderr, "ddpx: allreduces of %zu bytes or more go in two levels across %d hosts x %d ranks\n",
            options_.two_level_min_bytes, t.host_count, t.local_size);
  }
}

shm::Reduction GlooBackend::shm_reduction(DType dtype, ReduceOp op) {
  return shm::Reduction{reduce_function(dtype, op), dtype_size(dtype),
                        static_cast<uint8_t>(1 + static_cast<int>(dtype) * 8 + static_cast<int>(op))};
}

std::string GlooBackend::device_description() const {
  return device_ == nullptr ? bound_host_ : device_->str();
}

namespace {

uint64_t total_bytes(const TensorList& tensors) {
  uint64_t n = 0;
  for (const Tensor& t : tensors) n += t.nbytes();
  return n;
}

}  // namespace

uint32_t GlooBackend::match_key(uint64_t bytes, DType dtype, int root) {
  uint64_t h = bytes * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(dtype) << 7;
  h ^= static_cast<uint64_t>(static_cast<int64_t>(root) + 1) * 0xff51afd7ed558ccdULL;
  h ^= h >> 29;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return static_cast<uint32_t>(h >> 32);
}

std::shared_ptr<Work> GlooBackend::enqueue(OpType op, const TensorSummary& what,
                                           const OpTimeout& op_timeout_or_unset,
                                           OpBody body, uint32_t match) {
  const std::chrono::milliseconds timeout = op_timeout(op_timeout_or_unset);
  auto work = std::make_shared<GlooWork>(op, timeout);
  // Everything the op needs to run, in one allocation.
  struct Pending {
    std::shared_ptr<GlooWork> work;
    OpType op;
    TensorSummary what;
    OpContext context;
    OpBody body;
    // The flight recorder's entry for this op, when the front end recorded
    // it: marked started and completed here, and failures are named by it.
    TraceHandle trace;
  };
  auto pending = std::make_shared<Pending>(
      Pending{work, op, what, OpContext{}, std::move(body), CurrentTrace::claim()});
  WorkerPool::Task task;
  // A raw pointer, so that std::function keeps the capture in place instead
  // of allocating: `run` below owns `pending`, and a task is cancelled only
  // while its `run` is still alive beside it (worker_pool.cc).
  task.cancel = [p = pending.get()] {
    p->work->fail(p->trace.failed(absl::CancelledError(absl::StrCat(
        op_type_name(p->op), ": the gloo backend was destroyed before it ran"))));
  };
  // Numbering and queueing under one lock: each worker's queue is then in
  // sequence order even when several threads issue ops at once.
  std::lock_guard<std::mutex> lock(seq_mu_);
  const uint64_t seq = next_seq_++;
  const int worker = static_cast<int>(seq % worker_contexts_.size());
  const bool has_sync = !worker_sync_contexts_.empty();
  pending->context =
      OpContext{worker_contexts_[worker],
                has_sync ? worker_sync_contexts_[worker] : nullptr,
                has_sync ? &worker_sync_timeouts_[worker] : nullptr,
                worker_stores_[worker].get(), seq,
                tag_of(seq, match), timeout, {},
                &worker_scratch_[worker], shm_ != nullptr ? &shm_->channel(worker) : nullptr,
                two_level_.empty() ? nullptr : two_level_[worker].get()};
  task.run = [this, pending] {
    Pending& p = *pending;
    p.trace.started();
    OpContext& running = p.context;
    running.started = std::chrono::steady_clock::now();
    absl::StatusOr<TensorList> result;
    try {
      result = p.body(running);
    } catch (const StatusError& e) {
      result = decided_error(p.op, p.what, e.status());
    } catch (const std::exception& e) {
      absl::Status error =
          op_error(p.op, p.what.str(), running.timeout, running.started, e.what());
      name_transport_culprits(running, e.what(), &error);
      result = std::move(error);
    }
    if (result.ok()) {
      p.trace.completed();
      p.work->finish(std::move(*result));
    } else {
      op_failed_ = true;
      p.work->fail(p.trace.failed(result.status()));
    }
  };
  work->set_ticket(pool_->submit(worker, std::move(task)));
  return work;
}

absl::Status GlooBackend::decided_error(OpType op, const TensorSummary& what,
                                        const absl::Status& cause) const {
  absl::Status error(cause.code(), absl::StrCat(op_type_name(op), " of ", what.str(), " on rank ",
                                                rank(), " of ", size(), ": ", cause.message()));
  // The culprits the shared-memory path named (culprits.h).
  cause.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    error.SetPayload(url, payload);
  });
  return error;
}

Tensor GlooBackend::scratch_for(const OpContext& c, int64_t numel, DType dtype) {
  const int64_t nbytes = numel * static_cast<int64_t>(dtype_size(dtype));
  Tensor& buffer = *c.scratch;
  if (!buffer.defined() || buffer.numel() < nbytes) {
    buffer = Tensor::zeros({std::max<int64_t>(nbytes, 1)}, DType::kUInt8);
  }
  return Tensor::from_blob(buffer.data(), {numel}, dtype);
}

absl::Status GlooBackend::op_error(OpType op, const std::string& what,
                                   std::chrono::milliseconds timeout,
                                   std::chrono::steady_clock::time_point started,
                                   const std::string& cause) const {
  std::string head = absl::StrCat(op_type_name(op), " of ", what, " on rank ",
                                  rank(), " of ", size());
  if (std::chrono::steady_clock::now() - started >= timeout) {
    return absl::DeadlineExceededError(absl::StrCat(
        head, " timed out after ", timeout.count(), " ms: ", cause));
  }
  return absl::UnavailableError(absl::StrCat(
      head, " failed (timeout ", timeout.count(), " ms; a peer may have exited): ",
      cause));
}

std::shared_ptr<gloo::Context> GlooBackend::sync_pairs(const OpContext& c) const {
  if (c.sync_context == nullptr) return nullptr;
  if (*c.sync_timeout != c.timeout) {
    set_sync_pair_timeout(*c.sync_context, c.timeout);
    *c.sync_timeout = c.timeout;
  }
  return c.sync_context;
}

GlooBackend::AllreducePlan GlooBackend::allreduce_plan(size_t nbytes) const {
  // The classic classes wait as long as their pairs allow, so they run on
  // the sync pairs only, whose sockets get each op's timeout; the event-loop
  // pairs run Gloo's unbound-buffer algorithms, which take it per call.
  const bool has_sync = !worker_sync_contexts_.empty();
  const size_t piece_bytes = sync_piece_bytes();
  AllreduceAlgorithm algorithm = options_.allreduce_algorithm.value_or(
      choose_allreduce_algorithm(nbytes, size(), has_sync, piece_bytes));
  if (!allreduce_algorithm_supports(algorithm, size(), nbytes)) {
    algorithm = AllreduceAlgorithm::kGlooRing;
  }
  using Where = AllreducePlan::Where;
  if (has_sync && allreduce_runs_on_sync_pairs(algorithm, nbytes, size(), sync_limits_)) {
    return {algorithm, Where::kSyncPairs};
  }
  if (has_sync && piece_bytes > 0 && algorithm == AllreduceAlgorithm::kHalvingDoubling) {
    return {algorithm, Where::kSyncPieces};
  }
  if (is_classic_allreduce(algorithm)) algorithm = AllreduceAlgorithm::kGlooRing;
  return {algorithm, Where::kEventLoop};
}

void GlooBackend::name_transport_culprits(const OpContext& c, const std::string& cause,
                                          absl::Status* error) {
  PairReport report = report_pairs(*c.context, cause);
  if (c.sync_context != nullptr) {
    PairReport sync = report_pairs(*c.sync_context, cause);
    auto merge = [](std::vector<int>& into, const std::vector<int>& from) {
      into.insert(into.end(), from.begin(), from.end());
      std::sort(into.begin(), into.end());
      into.erase(std::unique(into.begin(), into.end()), into.end());
    };
    merge(report.no_data, sync.no_data);
    merge(report.not_asked, sync.not_asked);
    merge(report.named, sync.named);
  }
  // Gloo names the peer whose connection broke or whose read timed out.
  const bool gone = absl::StrContains(cause, "Connection closed by peer") ||
                    absl::StrContains(cause, "Connection reset") ||
                    absl::StrContains(cause, "Broken pipe");
  if (gone && !report.named.empty()) {
    set_culprits(error, {CulpritReason::kExited, report.named});
  } else if (!report.no_data.empty()) {
    set_culprits(error, {CulpritReason::kSilent, report.no_data});
  } else if (!report.named.empty()) {
    set_culprits(error, {CulpritReason::kSilent, report.named});
  } else if (!report.not_asked.empty()) {
    set_culprits(error, {CulpritReason::kNotReceiving, report.not_asked});
  }
}

void GlooBackend::allreduce_on_worker(const TensorList& tensors, ReduceOp op,
                                      const OpContext& c, uint32_t tag) const {
  if (tensors.empty() || tensors[0].numel() == 0) return;
  if (c.two_level != nullptr && tensors[0].nbytes() >= options_.two_level_min_bytes) {
    const Tensor& first = tensors[0];
    const size_t count = static_cast<size_t>(first.numel());
    UntypedReduceFn fn = reduce_function(first.dtype(), op);
    for (size_t i = 1; i < tensors.size(); ++i) fn(first.data(), first.data(), tensors[i].data(), count);
    throw_if_error(c.two_level->run(first, op, c.timeout));
    if (op == ReduceOp::AVG) divide_in_place(first.data(), count, first.dtype(), size());
    for (size_t i = 1; i < tensors.size(); ++i) copy_bytes(tensors[i], first.data());
    return;
  }
  if (c.shm != nullptr) {
    const Tensor& first = tensors[0];
    const shm::Reduction r = shm_reduction(first.dtype(), op);
    const size_t count = static_cast<size_t>(first.numel());
    for (size_t i = 1; i < tensors.size(); ++i) r.fn(first.data(), first.data(), tensors[i].data(), count);
    throw_if_error(shm::allreduce(*c.shm, first.data(), count, r,
                                  c.shm_deadline()));
    if (op == ReduceOp::AVG) divide_in_place(first.data(), count, first.dtype(), size());
    for (size_t i = 1; i < tensors.size(); ++i) copy_bytes(tensors[i], first.data());
    return;
  }
  AllreduceCall call;
  call.context = c.context;
  for (const Tensor& t : tensors) call.buffers.push_back(t.data());
  call.count = static_cast<size_t>(tensors[0].numel());
  call.dtype = tensors[0].dtype();
  call.op = op;
  call.tag = tag;
  call.timeout = c.timeout;
  const AllreducePlan plan = allreduce_plan(tensors[0].nbytes());
  switch (plan.where) {
    case AllreducePlan::Where::kSyncPairs:
      call.context = sync_pairs(c);
      run_allreduce(plan.algorithm, call);
      break;
    case AllreducePlan::Where::kSyncPieces:
      call.context = sync_pairs(c);
      run_allreduce_in_pieces(plan.algorithm, call, sync_piece_bytes());
      break;
    case AllreducePlan::Where::kEventLoop:
      run_allreduce(plan.algorithm, call);
      break;
  }
  if (op == ReduceOp::AVG) {
    for (const Tensor& t : tensors) {
      divide_in_place(t.data(), call.count, call.dtype, size());
    }
  }
}

std::shared_ptr<Work> GlooBackend::allreduce(const TensorList& tensors,
                                             const AllreduceOptions& opts) {
  if (std::shared_ptr<Work> work = small_allreduce_here(tensors, opts)) return work;
  return enqueue(OpType::kAllreduce, TensorSummary(tensors), opts.timeout,
                 [this, tensors, opts](const OpContext& c) mutable -> absl::StatusOr<TensorList> {
                   allreduce_on_worker(tensors, opts.op, c, c.tag);
                   return std::move(tensors);  // the body runs once
                 },
                 tensors.empty() ? 0 : match_key(tensors[0].nbytes(), tensors[0].dtype(), -1));
}

std::shared_ptr<Work> GlooBackend::allreduce_coalesced(
    const TensorList& tensors, const AllreduceOptions& opts) {
  return enqueue(
      OpType::kAllreduceCoalesced, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        if (tensors.empty()) return tensors;
        // One flat message instead of one per tensor: that is the point.
        int64_t total = 0;
        for (const Tensor& t : tensors) total += t.numel();
        Tensor flat = scratch_for(c, total, tensors[0].dtype());
        flatten_into(tensors, flat);
        allreduce_on_worker({flat}, opts.op, c, c.tag);
        unflatten_into(flat, tensors);
        return tensors;
      },
      tensors.empty() ? 0 : match_key(total_bytes(tensors), tensors[0].dtype(), -1));
}

std::shared_ptr<Work> GlooBackend::barrier(const BarrierOptions& opts) {
  return enqueue(OpType::kBarrier, TensorSummary(), opts.timeout,
                 [this](const OpContext& c) -> absl::StatusOr<TensorList> {
                   if (c.shm != nullptr) {
                     throw_if_error(shm::barrier(*c.shm, c.shm_deadline()));
                     return TensorList{};
                   }
                   if (auto sync = sync_pairs(c); sync != nullptr && size() > 1) {
                     barrier_classic(sync);
                     return TensorList{};
                   }
                   gloo::BarrierOptions o(c.context);
                   o.setTag(c.tag);
                   o.setTimeout(c.timeout);
                   gloo::barrier(o);
                   return TensorList{};
                 });
}

absl::StatusOr<std::shared_ptr<Backend>> create_gloo_backend(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout) {
  absl::StatusOr<GlooOptions> options = GlooOptions::from_env();
  if (!options.ok()) return options.status();
  absl::StatusOr<std::shared_ptr<GlooBackend>> backend =
      GlooBackend::create(std::move(store), rank, size, timeout, *options);
  if (!backend.ok()) return backend.status();
  return std::shared_ptr<Backend>(std::move(*backend));
}

}  // namespace ddpx
