#include "process_group/rendezvous/launch_env.h"

#include <cstdlib>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ddpx {
namespace {

// Reads an integer variable; `required` makes an unset one an error naming it.
absl::StatusOr<int64_t> int_var(const EnvLookup& env, const char* name,
                                bool required, int64_t fallback,
                                const char* family) {
  const char* value = env(name);
  if (value == nullptr || *value == '\0') {
    if (!required) return fallback;
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not set (", family, " launch environment needs it)"));
  }
  int64_t parsed;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", value, "' is not an integer"));
  }
  return parsed;
}

// SLURM_NTASKS_PER_NODE may read "4" or "4(x2)": the leading count.
int64_t leading_int(const char* value, int64_t fallback) {
  if (value == nullptr) return fallback;
  absl::string_view v(value);
  size_t end = 0;
  while (end < v.size() && v[end] >= '0' && v[end] <= '9') ++end;
  int64_t parsed;
  if (end == 0 || !absl::SimpleAtoi(v.substr(0, end), &parsed)) return fallback;
  return parsed;
}

absl::Status check_port(const char* name, int64_t port) {
  if (port >= 1 && port <= 65535) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=", port, " is not a TCP port (1..65535)"));
}

absl::Status check_position(const LaunchEnv& e, const char* rank_var,
                            const char* size_var) {
  if (e.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(size_var, "=", e.world_size, " must be at least 1"));
  }
  if (e.rank < 0 || e.rank >= e.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(rank_var, "=", e.rank, " is out of range for ", size_var,
                     "=", e.world_size, " (valid: 0..", e.world_size - 1, ")"));
  }
  return absl::OkStatus();
}

// MASTER_ADDR/MASTER_PORT, both required.
absl::Status read_master(const EnvLookup& env, const char* family, LaunchEnv* e) {
  const char* addr = env("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(
        "MASTER_ADDR is not set (", family,
        " launch environment needs MASTER_ADDR and MASTER_PORT)"));
  }
  e->master_addr = addr;
  absl::StatusOr<int64_t> port = int_var(env, "MASTER_PORT", true, -1, family);
  if (!port.ok()) return port.status();
  if (absl::Status s = check_port("MASTER_PORT", *port); !s.ok()) return s;
  e->master_port = static_cast<int>(*port);
  return absl::OkStatus();
}

absl::StatusOr<LaunchEnv> read_torchrun(const EnvLookup& env) {
  const char* family = "torchrun-style (RANK set)";
  LaunchEnv e;
  absl::StatusOr<int64_t> v = int_var(env, "RANK", true, -1, family);
  if (!v.ok()) return v.status();
  e.rank = static_cast<int>(*v);
  if (!(v = int_var(env, "WORLD_SIZE", true, -1, family)).ok()) return v.status();
  e.world_size = static_cast<int>(*v);
  if (!(v = int_var(env, "LOCAL_RANK", false, -1, family)).ok()) return v.status();
  e.local_rank = static_cast<int>(*v);
  if (!(v = int_var(env, "LOCAL_WORLD_SIZE", false, -1, family)).ok()) return v.status();
  e.local_world_size = static_cast<int>(*v);
  if (absl::Status s = check_position(e, "RANK", "WORLD_SIZE"); !s.ok()) return s;
  if (absl::Status s = read_master(env, family, &e); !s.ok()) return s;
  return e;
}

absl::StatusOr<LaunchEnv> read_slurm(const EnvLookup& env) {
  const char* family = "SLURM (SLURM_PROCID set)";
  LaunchEnv e;
  absl::StatusOr<int64_t> v = int_var(env, "SLURM_PROCID", true, -1, family);
  if (!v.ok()) return v.status();
  e.rank = static_cast<int>(*v);
  if (!(v = int_var(env, "SLURM_NTASKS", true, -1, family)).ok()) return v.status();
  e.world_size = static_cast<int>(*v);
  if (!(v = int_var(env, "SLURM_LOCALID", false, -1, family)).ok()) return v.status();
  e.local_rank = static_cast<int>(*v);
  e.local_world_size =
      static_cast<int>(leading_int(env("SLURM_NTASKS_PER_NODE"), -1));
  if (absl::Status s = check_position(e, "SLURM_PROCID", "SLURM_NTASKS"); !s.ok()) {
    return s;
  }

  // The master: MASTER_ADDR if the job script set one, else the node srun
  // was launched from, else the first node of the allocation.
  if (const char* addr = env("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    e.master_addr = addr;
  } else if (const char* ip = env("SLURM_LAUNCH_NODE_IPADDR");
             ip != nullptr && *ip != '\0') {
    e.master_addr = ip;
  } else {
    const char* nodes = env("SLURM_JOB_NODELIST");
    if (nodes == nullptr || *nodes == '\0') nodes = env("SLURM_NODELIST");
    if (nodes == nullptr || *nodes == '\0') {
      return absl::InvalidArgumentError(
          "SLURM launch: no master address: set MASTER_ADDR, or run under "
          "srun (SLURM_LAUNCH_NODE_IPADDR, SLURM_JOB_NODELIST or "
          "SLURM_NODELIST)");
    }
    absl::StatusOr<std::string> host = first_slurm_host(nodes);
    if (!host.ok()) return host.status();
    e.master_addr = *host;
  }

  if (const char* port = env("MASTER_PORT"); port != nullptr && *port != '\0') {
    if (!(v = int_var(env, "MASTER_PORT", true, -1, family)).ok()) return v.status();
    if (absl::Status s = check_port("MASTER_PORT", *v); !s.ok()) return s;
    e.master_port = static_cast<int>(*v);
  } else {
    if (!(v = int_var(env, "SLURM_JOB_ID", true, -1,
                      "SLURM without MASTER_PORT (the port derives from the job id)"))
             .ok()) {
      return v.status();
    }
    e.master_port = slurm_default_port(*v);
  }
  return e;
}

absl::StatusOr<LaunchEnv> read_ompi(const EnvLookup& env) {
  const char* family = "Open MPI (OMPI_COMM_WORLD_RANK set)";
  LaunchEnv e;
  absl::StatusOr<int64_t> v = int_var(env, "OMPI_COMM_WORLD_RANK", true, -1, family);
  if (!v.ok()) return v.status();
  e.rank = static_cast<int>(*v);
  if (!(v = int_var(env, "OMPI_COMM_WORLD_SIZE", true, -1, family)).ok()) return v.status();
  e.world_size = static_cast<int>(*v);
  if (!(v = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK", false, -1, family)).ok()) {
    return v.status();
  }
  e.local_rank = static_cast<int>(*v);
  if (!(v = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE", false, -1, family)).ok()) {
    return v.status();
  }
  e.local_world_size = static_cast<int>(*v);
  if (absl::Status s =
          check_position(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = read_master(env, family, &e); !s.ok()) return s;
  return e;
}

bool is_set(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

absl::Status read_master_address(const EnvLookup& env, LaunchEnv* out) {
  return read_master(env, "env://", out);
}

absl::StatusOr<LaunchEnv> read_launch_env_from(const EnvLookup& env) {
  if (is_set(env, "RANK") || is_set(env, "WORLD_SIZE")) return read_torchrun(env);
  if (is_set(env, "SLURM_PROCID")) return read_slurm(env);
  if (is_set(env, "OMPI_COMM_WORLD_RANK")) return read_ompi(env);
  return absl::InvalidArgumentError(
      "no launch environment found: set RANK and WORLD_SIZE (with "
      "MASTER_ADDR and MASTER_PORT), or run under SLURM (SLURM_PROCID, "
      "SLURM_NTASKS) or Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
}

absl::StatusOr<LaunchEnv> read_launch_env() {
  return read_launch_env_from([](const char* name) { return std::getenv(name); });
}

std::string TorchrunAgentStore::key_prefix() const {
  return absl::StrCat("/worker/attempt_", restart_count);
}

absl::StatusOr<TorchrunAgentStore> read_torchrun_agent_store(const EnvLookup& env) {
  TorchrunAgentStore agent;
  // torch compares with str(True), so "true" or "1" do not count either.
  const char* use = env("TORCHELASTIC_USE_AGENT_STORE");
  agent.in_use = use != nullptr && absl::string_view(use) == "True";
  if (!agent.in_use) return agent;
  absl::StatusOr<int64_t> count =
      int_var(env, "TORCHELASTIC_RESTART_COUNT", true, -1,
              "torchrun with TORCHELASTIC_USE_AGENT_STORE=True");
  if (!count.ok()) return count.status();
  if (*count < 0 || *count > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TORCHELASTIC_RESTART_COUNT=", *count, " must be a count (0 or more)"));
  }
  agent.restart_count = static_cast<int>(*count);
  return agent;
}

absl::StatusOr<std::string> first_slurm_host(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    char c = nodelist[end];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
  }
  std::string first = nodelist.substr(0, end);
  size_t open = first.find('[');
  if (open == std::string::npos) {
    if (first.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM node list '", nodelist, "' has no host"));
    }
    return first;
  }
  size_t close = first.find(']', open);
  if (close == std::string::npos || close == open + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM node list '", nodelist, "' has a malformed range"));
  }
  // "003-005,9" -> "003": zero padding is part of the host name.
  std::string range = first.substr(open + 1, close - open - 1);
  size_t stop = range.find_first_of(",-");
  std::string index = range.substr(0, stop);
  return first.substr(0, open) + index + first.substr(close + 1);
}

int slurm_default_port(int64_t job_id) {
  // 15000..29999: above common service ports and below Linux's default
  // ephemeral range (32768+), where outgoing connections take their ports.
  return static_cast<int>(15000 + (job_id % 15000));
}

}  // namespace ddpx
