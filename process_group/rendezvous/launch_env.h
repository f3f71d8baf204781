// Reading where this process sits in a job from its launcher's environment:
// torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), SLURM (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_NTASKS_PER_NODE, SLURM_LAUNCH_NODE_IPADDR,
// SLURM_JOB_NODELIST / SLURM_NODELIST, SLURM_JOB_ID) or Open MPI
// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), first match wins;
// and whether torchrun's agent serves the store (TORCHELASTIC_*).
// read_launch_env() in init.h is this with the process environment.
#ifndef DDPX_PROCESS_GROUP_RENDEZVOUS_LAUNCH_ENV_H_
#define DDPX_PROCESS_GROUP_RENDEZVOUS_LAUNCH_ENV_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "process_group/rendezvous/init.h"

namespace ddpx {

// Returns the variable's value, or null when unset (like getenv).
using EnvLookup = std::function<const char*(const char* name)>;

absl::StatusOr<LaunchEnv> read_launch_env_from(const EnvLookup& env);

// Just MASTER_ADDR and MASTER_PORT (env:// when rank and world size come
// from the caller); errors name the missing or malformed variable.
absl::Status read_master_address(const EnvLookup& env, LaunchEnv* out);

// torchrun (torch >= 2.x) has its elastic agent serve a TCPStore on
// MASTER_ADDR:MASTER_PORT and says so with TORCHELASTIC_USE_AGENT_STORE=True:
// ranks then join that store as clients (rank 0 must not host its own) and,
// as torch does, keep their keys under "/worker/attempt_<restart count>" so
// a restarted job never reads the keys of the attempt before it.
struct TorchrunAgentStore {
  bool in_use = false;    // TORCHELASTIC_USE_AGENT_STORE is exactly "True"
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT
  std::string key_prefix() const;  // "/worker/attempt_<restart_count>"
};
// Errors name a missing or malformed TORCHELASTIC_RESTART_COUNT when the
// agent store is in use.
absl::StatusOr<TorchrunAgentStore> read_torchrun_agent_store(const EnvLookup& env);

// The first host of a SLURM node list: "node[003-005,9],gpu1" -> "node003".
absl::StatusOr<std::string> first_slurm_host(const std::string& nodelist);

// The rendezvous port SLURM jobs use when MASTER_PORT is unset: derived from
// the job id so that concurrent jobs sharing a node pick different ports.
int slurm_default_port(int64_t job_id);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_RENDEZVOUS_LAUNCH_ENV_H_
