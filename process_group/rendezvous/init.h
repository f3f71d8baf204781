// Rendezvous: building a ProcessGroup from an init method and a backend name.
#ifndef DDPX_PROCESS_GROUP_RENDEZVOUS_INIT_H_
#define DDPX_PROCESS_GROUP_RENDEZVOUS_INIT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "process_group/rendezvous/job_identity.h"
#include "process_group/front_end/process_group.h"
#include "store/store.h"
#include "store/tcp_store_server.h"

namespace ddpx {

struct InitOptions {
  // "gloo", "nccl", "round_robin:gloo*2".
  std::string backend = "gloo";
  // "env://" (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, or SLURM_*, or
  // OMPI_COMM_WORLD_*), "tcp://host:port", "file:///path". env:// under
  // torchrun with TORCHELASTIC_USE_AGENT_STORE=True joins the store the
  // elastic agent serves at MASTER_ADDR:MASTER_PORT instead of having rank 0
  // host one (see TorchrunAgentStore in launch_env.h).
  std::string init_method = "env://";
  int world_size = -1;  // -1: from the init method / environment
  int rank = -1;
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // An already-built store; when set, init_method is ignored.
  std::shared_ptr<Store> store;
  // Stated at rendezvous with the world size (job_identity.h): a rank of
  // another job, or one started with another world size, fails naming both.
  std::string job_id;
  // The settings every rank of the job must agree on, as (name, value)
  // pairs in a fixed order (model shape, hook, seed, learning rate...);
  // rank 0 publishes its own and a rank that differs is refused naming the
  // first differing setting with both values (job_identity.h says who else
  // fails). Empty: nothing is compared.
  JobSettings job_settings;
  // Memory limit of the rendezvous store server rank 0 serves (tcp:// and
  // env:// without torchrun's agent store), in bytes; 0: none. The default
  // bounds what one request from anyone who reaches the port can make rank
  // 0 hold (docs/store.md, "Limits").
  uint64_t store_max_memory = TCPStoreServerOptions::kDefaultMaxMemory;
};

// Where this process sits in the job, as read from the environment.
struct LaunchEnv {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  std::string master_addr;
  int master_port = -1;
};
absl::StatusOr<LaunchEnv> read_launch_env();

// Creates the group and makes it the default group.
absl::StatusOr<std::shared_ptr<ProcessGroup>> init_process_group(
    const InitOptions& options);
// The default group (null before init_process_group / after destroy).
std::shared_ptr<ProcessGroup> default_process_group();
// A subgroup of the default group's ranks, sharing its store through a
// PrefixStore. Every rank of the default group must call it with the same
// ranks (torch semantics); ranks outside `ranks` get nullptr.
absl::StatusOr<std::shared_ptr<ProcessGroup>> new_group(
    const std::vector<int>& ranks, const std::string& backend = "");
void destroy_process_group();

// ---- Groups by host: for two-level (hierarchical) collectives --------------

// Where this rank sits among the hosts of a group.
struct HostPlacement {
  int host_count = 1;
  int host_index = 0;  // this rank's host
  int local_rank = 0;  // this rank's place on its host
  int local_size = 1;  // ranks per host (the same on every host)
};

// `local_size` > 0: hosts of that many consecutive ranks (it must divide the
// group's size). 0: the hosts the group's backend saw at rendezvous
// (ProcessGroup::host_topology), which must all hold the same number of
// ranks; where the backend knows no hosts, LOCAL_WORLD_SIZE (consecutive
// ranks, as launchers number them; the one place the library reads it).
// Errors name the problem and the way out.
absl::StatusOr<HostPlacement> host_placement(const ProcessGroup& group, int local_size = 0);

// The per-host group of `group` (`local`: the ranks on this rank's host,
// in local-rank order) and its cross-host group (`cross`: the ranks with
// this rank's local rank, one per host, in host order), placed as
// host_placement(group, local_size) says. Built on the first call for a
// group and local_size, over the group's store with its backend kind and
// timeout, and kept by the group (ProcessGroup::memoize): later calls return
// the same groups, which live as long as the group or whoever holds them.
// As with torch's new_group, building is collective: every rank of `group`
// makes its first call for it, and ranks make their first calls for groups
// sharing one store in the same order.
struct HostSubgroups {
  HostPlacement placement;
  std::shared_ptr<ProcessGroup> local;
  std::shared_ptr<ProcessGroup> cross;
};
absl::StatusOr<std::shared_ptr<const HostSubgroups>> host_subgroups(ProcessGroup& group,
                                                                     int local_size = 0);

// Backends register a factory under a name ("gloo", "nccl").
using BackendFactory = std::function<absl::StatusOr<std::shared_ptr<Backend>>(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout)>;
void register_backend(const std::string& name, BackendFactory factory);
// Builds a backend from a backend string (including "round_robin:gloo*2").
absl::StatusOr<std::shared_ptr<Backend>> create_backend(
    const std::string& spec, std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_RENDEZVOUS_INIT_H_
