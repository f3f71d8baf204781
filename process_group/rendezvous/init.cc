// init_process_group / new_group / destroy_process_group: turning an init
// method into a store, the store into a backend, and keeping the default
// group.
#include "process_group/rendezvous/init.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/rendezvous/job_identity.h"
#include "process_group/rendezvous/launch_env.h"
#include "process_group/tracing/trace_service.h"
#include "store/file_store.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

// The process-wide default group and what new_group needs to derive more.
struct World {
  std::mutex mu;
  std::shared_ptr<ProcessGroup> default_group;
  std::shared_ptr<Store> root_store;  // unprefixed; holds the TCP server on rank 0
  std::string backend;
  std::chrono::milliseconds timeout{0};
  // Every rank of the world calls new_group in the same order, so this
  // counter names the same group on every rank.
  int groups_created = 0;
};

World& world() {
  static World* w = new World;
  return *w;
}

struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
};

// The rendezvous store at host:port. Normally rank 0 serves it in-process;
// under torchrun's agent store every rank is a client of the agent's server.
absl::StatusOr<std::shared_ptr<Store>> connect_tcp(const std::string& host,
                                                   int port, int rank,
                                                   int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   uint64_t max_memory,
                                                   bool agent_serves = false) {
  TCPStoreOptions opts;
  opts.server.max_memory = max_memory;
  opts.port = static_cast<uint16_t>(port);
  opts.is_master = rank == 0 && !agent_serves;
  opts.num_workers = world_size;
  opts.timeout = timeout;
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(host, opts);
  if (!store.ok()) {
    return absl::Status(
        store.status().code(),
        absl::StrCat(agent_serves ? "joining torchrun's agent store at " : "rendezvous with ",
                     host, ":", port, " as rank ", rank, " of ", world_size,
                     agent_serves ? " (TORCHELASTIC_USE_AGENT_STORE=True)" : "", ": ",
                     store.status().message()));
  }
  return std::shared_ptr<Store>(*std::move(store));
}

// "host:port" or "[v6addr]:port".
absl::Status parse_host_port(absl::string_view text, const std::string& url,
                             std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_method '", url, "': expected tcp://host:port"));
  }
  absl::string_view h = text.substr(0, colon);
  if (absl::ConsumePrefix(&h, "[") && !absl::ConsumeSuffix(&h, "]")) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_method '", url, "': unterminated '[' in the host"));
  }
  if (!absl::SimpleAtoi(text.substr(colon + 1), port) || *port < 1 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init_method '", url, "': port '", text.substr(colon + 1),
        "' is not a TCP port (1..65535)"));
  }
  *host = std::string(h);
  return absl::OkStatus();
}

absl::Status need_position(const InitOptions& o, const char* method) {
  if (o.rank >= 0 && o.world_size >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      method, " needs rank and world_size in InitOptions (got rank ", o.rank,
      ", world_size ", o.world_size, ")"));
}

absl::StatusOr<Rendezvous> rendezvous(const InitOptions& o) {
  Rendezvous r;
  r.rank = o.rank;
  r.world_size = o.world_size;
  if (o.store != nullptr) {
    if (absl::Status s = need_position(o, "InitOptions.store"); !s.ok()) return s;
    r.store = o.store;
    return r;
  }
  const std::string& url = o.init_method;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "env://")) {
    LaunchEnv env;
    auto getenv_fn = [](const char* name) { return std::getenv(name); };
    if (o.rank >= 0 && o.world_size >= 1) {
      // The caller knows its place; only the master comes from the environment.
      if (absl::Status s = read_master_address(getenv_fn, &env); !s.ok()) return s;
    } else {
      absl::StatusOr<LaunchEnv> read = read_launch_env_from(getenv_fn);
      if (!read.ok()) return read.status();
      env = *read;
      if (r.rank < 0) r.rank = env.rank;
      if (r.world_size < 1) r.world_size = env.world_size;
    }
    absl::StatusOr<TorchrunAgentStore> agent = read_torchrun_agent_store(getenv_fn);
    if (!agent.ok()) return agent.status();
    absl::StatusOr<std::shared_ptr<Store>> s = connect_tcp(
        env.master_addr, env.master_port, r.rank, r.world_size, o.timeout, o.store_max_memory,
        agent->in_use);
    if (!s.ok()) return s.status();
    r.store = *s;
    if (agent->in_use) r.store = std::make_shared<PrefixStore>(agent->key_prefix(), r.store);
    return r;
  }
  if (absl::ConsumePrefix(&rest, "tcp://")) {
    if (absl::Status s = need_position(o, "init_method tcp://"); !s.ok()) return s;
    std::string host;
    int port = 0;
    if (absl::Status s = parse_host_port(rest, url, &host, &port); !s.ok()) return s;
    absl::StatusOr<std::shared_ptr<Store>> s =
        connect_tcp(host, port, r.rank, r.world_size, o.timeout, o.store_max_memory);
    if (!s.ok()) return s.status();
    r.store = *s;
    return r;
  }
  if (absl::ConsumePrefix(&rest, "file://")) {
    if (absl::Status s = need_position(o, "init_method file://"); !s.ok()) return s;
    if (rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("init_method '", url, "': expected file:///path"));
    }
    absl::StatusOr<std::unique_ptr<FileStore>> s =
        FileStore::open(std::string(rest), o.timeout);
    if (!s.ok()) return s.status();
    r.store = std::shared_ptr<Store>(*std::move(s));
    return r;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown init_method '", url,
      "': expected env://, tcp://host:port or file:///path"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> init_process_group(
    const InitOptions& options) {
  World& w = world();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.default_group != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "init_process_group: already initialized (rank ",
          w.default_group->rank(), " of ", w.default_group->size(),
          "); call destroy_process_group() first"));
    }
  }
  absl::StatusOr<Rendezvous> r = rendezvous(options);
  if (!r.ok()) return r.status();
  if (r->rank < 0 || r->rank >= r->world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init_process_group: rank ", r->rank, " is out of range for world_size ",
        r->world_size));
  }
  if (absl::Status s = check_job_identity(*r->store, r->rank, r->world_size,
                                         options.job_id, options.timeout,
                                         options.job_settings);
      !s.ok()) {
    return s;
  }
  auto group_store = std::make_shared<PrefixStore>("default_pg", r->store);
  absl::StatusOr<std::shared_ptr<Backend>> backend = create_backend(
      options.backend, group_store, r->rank, r->world_size, options.timeout);
  if (!backend.ok()) return backend.status();
  auto group = std::make_shared<ProcessGroup>(*std::move(backend), group_store,
                                              options.timeout);
  std::vector<int> all_ranks(static_cast<size_t>(r->world_size));
  for (int i = 0; i < r->world_size; ++i) all_ranks[static_cast<size_t>(i)] = i;
  FlightRecorder::get().set_group_ranks(group->trace_group().index(), std::move(all_ranks));

  std::lock_guard<std::mutex> lock(w.mu);
  if (w.default_group != nullptr) {
    return absl::FailedPreconditionError(
        "init_process_group: another thread initialized the default group "
        "meanwhile");
  }
  w.default_group = group;
  w.root_store = r->store;
  // Dumps on failure, SIGUSR1 and peers' requests; peer states in errors.
  TraceService::get().attach_world(r->store, r->rank, r->world_size);
  w.backend = options.backend;
  w.timeout = options.timeout;
  w.groups_created = 0;
  return group;
}

std::shared_ptr<ProcessGroup> default_process_group() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.default_group;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> new_group(
    const std::vector<int>& ranks, const std::string& backend) {
  World& w = world();
  std::shared_ptr<Store> root;
  std::string spec;
  std::chrono::milliseconds timeout;
  int my_rank, world_size, id;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.default_group == nullptr) {
      return absl::FailedPreconditionError(
          "new_group: no default group; call init_process_group first");
    }
    my_rank = w.default_group->rank();
    world_size = w.default_group->size();
    root = w.root_store;
    spec = backend.empty() ? w.backend : backend;
    timeout = w.timeout;
    // Counted before validating, like torch: every rank calls new_group with
    // the same arguments, so a bad call fails everywhere and the counters
    // stay in step.
    id = ++w.groups_created;
  }
  std::vector<int> members = ranks;
  if (members.empty()) {
    for (int i = 0; i < world_size; ++i) members.push_back(i);
  }
  std::set<int> seen;
  for (int r : members) {
    if (r < 0 || r >= world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "new_group: rank ", r, " is out of range for the default group of size ",
          world_size, " (valid: 0..", world_size - 1, ")"));
    }
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("new_group: rank ", r, " is listed twice"));
    }
  }
  std::sort(members.begin(), members.end());
  auto me = std::find(members.begin(), members.end(), my_rank);
  if (me == members.end()) return std::shared_ptr<ProcessGroup>();

  const int group_rank = static_cast<int>(me - members.begin());
  const int group_size = static_cast<int>(members.size());
  auto store = std::make_shared<PrefixStore>(absl::StrCat("group_", id), root);
  absl::StatusOr<std::shared_ptr<Backend>> b =
      create_backend(spec, store, group_rank, group_size, timeout);
  if (!b.ok()) {
    return absl::Status(b.status().code(),
                        absl::StrCat("new_group #", id, ": ", b.status().message()));
  }
  auto group = std::make_shared<ProcessGroup>(*std::move(b), store, timeout);
  FlightRecorder::get().set_group_ranks(group->trace_group().index(), members);
  return group;
}

void destroy_process_group() {
  World& w = world();
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<Store> root;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    group = std::move(w.default_group);
    root = std::move(w.root_store);
    w.backend.clear();
    w.groups_created = 0;
  }
  // Released outside the lock: a backend's destructor waits for the ops
  // still running (up to their timeout), and default_process_group() or a
  // new init_process_group on another thread must not wait behind that.
  // The group goes first: its backend's store connections are clients of
  // the server that `root` may host (rank 0 under tcp:// and env://), and a
  // backend that waits for its peers before closing (gloo's closing
  // handshake) thereby also keeps that server up until the peers are done
  // with it.
  if (group != nullptr) TraceService::get().detach_world();
  group.reset();
  root.reset();
}

namespace {

// Hosts of `local` consecutive ranks, checked to divide the group.
absl::StatusOr<HostPlacement> consecutive_hosts(int local, const ProcessGroup& group,
                                                const char* source) {
  const int rank = group.rank(), world = group.size();
  if (local < 1 || world % local != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host_placement: local size ", local, " (", source,
        ") must be positive and divide the group size ", world));
  }
  return HostPlacement{world / local, rank / local, rank % local, local};
}

}  // namespace

absl::StatusOr<HostPlacement> host_placement(const ProcessGroup& group, int local_size) {
  if (local_size != 0) return consecutive_hosts(local_size, group, "local_size");
  if (const HostTopology* t = group.host_topology(); t != nullptr) {
    if (!t->uniform()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "host_placement: the ", t->host_count, " hosts of this group hold different "
          "numbers of ranks (pass a local size to group consecutive ranks instead)"));
    }
    return HostPlacement{t->host_count, t->host_index, t->local_rank, t->local_size};
  }
  const char* env = std::getenv("LOCAL_WORLD_SIZE");
  if (env == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host_placement: the group's backend (", group.backend_name(),
        ") does not know its hosts: set LOCAL_WORLD_SIZE or pass a local size"));
  }
  int local = 0;
  if (!absl::SimpleAtoi(env, &local)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_placement: LOCAL_WORLD_SIZE='", env, "' is not an integer"));
  }
  return consecutive_hosts(local, group, "LOCAL_WORLD_SIZE");
}

absl::StatusOr<std::shared_ptr<const HostSubgroups>> host_subgroups(ProcessGroup& group,
                                                                     int local_size) {
  absl::StatusOr<HostPlacement> place = host_placement(group, local_size);
  if (!place.ok()) return place.status();
  if (group.store() == nullptr) {
    return absl::FailedPreconditionError(
        "host_subgroups: the subgroups are built over the group's store, and this group "
        "has none");
  }
  const HostPlacement p = *place;
  absl::StatusOr<std::shared_ptr<const void>> built = group.memoize(
      absl::StrCat("host_subgroups/", local_size),
      [&]() -> absl::StatusOr<std::shared_ptr<const void>> {
        // Ranks build in the same order, so the n-th build of every rank
        // gets the same keys.
        absl::StatusOr<int64_t> n =
            group.store()->add(absl::StrCat("host_subgroups/count/", group.rank()), 1);
        if (!n.ok()) return n.status();
        auto subgroup = [&](const std::string& name, int rank, int size)
            -> absl::StatusOr<std::shared_ptr<ProcessGroup>> {
          auto store = std::make_shared<PrefixStore>(
              absl::StrCat("host_subgroups/", *n, "/", name), group.store());
          absl::StatusOr<std::shared_ptr<Backend>> backend =
              create_backend(group.backend_name(), store, rank, size, group.timeout());
          if (!backend.ok()) {
            return absl::Status(backend.status().code(),
                                absl::StrCat("host_subgroups: building the group ", name, ": ",
                                             backend.status().message()));
          }
          return std::make_shared<ProcessGroup>(*std::move(backend), store, group.timeout());
        };
        auto out = std::make_shared<HostSubgroups>();
        out->placement = p;
        absl::StatusOr<std::shared_ptr<ProcessGroup>> local =
            subgroup(absl::StrCat("host", p.host_index), p.local_rank, p.local_size);
        if (!local.ok()) return local.status();
        absl::StatusOr<std::shared_ptr<ProcessGroup>> cross =
            subgroup(absl::StrCat("cross", p.local_rank), p.host_index, p.host_count);
        if (!cross.ok()) return cross.status();
        out->local = *std::move(local);
        out->cross = *std::move(cross);
        return std::shared_ptr<const void>(std::move(out));
      });
  if (!built.ok()) return built.status();
  return std::static_pointer_cast<const HostSubgroups>(*built);
}

}  // namespace ddpx
