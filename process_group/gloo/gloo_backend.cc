// GlooBackend: rendezvous (which also makes the group's execution plan), the
// op queue and error reporting. The collectives' entry points are in
// gloo_collectives.cc, point-to-point ops and monitored_barrier in
// gloo_p2p.cc; their paths in the files execution_plan.h names.
#include "process_group/gloo/gloo_backend.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce_ring.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "core/culprits.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/gloo/closing_handshake.h"
#include "process_group/gloo/gloo_internal.h"
#include "process_group/gloo/send_buffer_autotuning.h"
#include "process_group/gloo/store_adapter.h"
#include "process_group/gloo/sync_pairs.h"
#include "process_group/gloo/tcp_pair_access.h"
#include "process_group/gloo/two_level_allreduce.h"
#include "process_group/rendezvous/host_identity.h"
#include "process_group/gloo/network_interfaces.h"
#include "process_group/gloo/gloo_work.h"
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
    for (const auto& c : worker_contexts_) sockets_.record(*c);
    for (const auto& c : worker_sync_contexts_) sockets_.record(*c);
    sockets_.record(*p2p_context_);
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
  completed_here_.resize(options_.num_workers);
  GroupPaths paths;
  paths.size = size();
  paths.two_level = !two_level_.empty();
  paths.two_level_min_bytes = options_.two_level_min_bytes;
  paths.shared_memory = shm_ != nullptr;
  paths.sync_pairs = !worker_sync_contexts_.empty();
  paths.sync_limits = sync_limits_;
  paths.allreduce_algorithm = options_.allreduce_algorithm;
  plan_ = std::make_unique<ExecutionPlan>(paths);
  runner_ = std::make_unique<CollectiveRunner>(*plan_, rank(), size());
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

std::string GlooBackend::device_description() const {
  return device_ == nullptr ? bound_host_ : device_->str();
}

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
      if (aborted_.load()) {
        // The connection closed because abort() shut it down: its cause,
        // which names the culprit, is the op's error.
        std::lock_guard<std::mutex> lock(abort_mu_);
        result = decided_error(p.op, p.what, abort_why_);
      } else {
        absl::Status error =
            op_error(p.op, p.what.str(), running.timeout, running.started, e.what());
        name_transport_culprits(running, e.what(), &error);
        result = std::move(error);
      }
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

void GlooBackend::abort(const absl::Status& why) {
  if (why.ok() || pool_ == nullptr) return;  // nothing to abort before connect() ended
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_.load()) return;
    abort_why_ = why;
    aborted_ = true;
  }
  op_failed_ = true;  // no closing handshake over the shut connections
  if (shm_ != nullptr) {
    std::optional<Culprits> c = culprits_of(why);
    shm_->abort(why, c.has_value() && c->ranks.size() == 1 ? c->ranks[0] : -1);
  }
  // Their groups number the ranks otherwise: the culprits stay with this one.
  for (const auto& t : two_level_) t->abort(absl::Status(why.code(), why.message()));
  sockets_.shut_down();
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
