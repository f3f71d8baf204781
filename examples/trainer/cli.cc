#include "examples/trainer/cli.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "examples/launcher/launcher.h"
#include "examples/trainer/init_flags.h"
#include "hooks/registry.h"

namespace ddpx::trainer {

bool launched_as_rank(int rank_flag, const std::string& init_flag, int nproc_flag) {
  if (rank_flag >= 0) return true;
  for (const char* v : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
    if (getenv(v) != nullptr) return true;
  return init_flag.rfind("env://", 0) != 0 && nproc_flag <= 1;
}

int local_world_size() {
  for (const char* v : {"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    const char* s = getenv(v);
    if (s != nullptr && atoi(s) > 0) return atoi(s);
  }
  return 1;
}

int launch_local(int nproc, const std::string& job_id_flag, int argc, char** argv) {
  launcher::LaunchOptions o;
  o.nproc = nproc;
  o.program = "/proc/self/exe";
  for (int i = 1; i < argc; ++i) o.args.push_back(argv[i]);
  // Derived from this launch: ranks of another job on the same port are refused.
  if (job_id_flag.empty()) o.args.push_back("--job_id=" + new_local_job_id());
  launcher::LaunchResult r = launcher::launch_local_ranks(o);
  if (r.exit_code != 0) fprintf(stderr, "%s\n", r.message.c_str());
  return r.exit_code;
}

absl::StatusOr<std::string> hook_identity(const std::string& sync, const std::string& spec) {
  if (sync == "per_param") return std::string("per_param");
  absl::StatusOr<std::vector<HookSpecPart>> parts = parse_hook_spec(spec);
  if (!parts.ok()) return parts.status();
  std::string out;
  for (const HookSpecPart& part : *parts) {
    out += (out.empty() ? "" : "+") + part.name;
    const char* sep = ":";
    for (const auto& [key, value] : part.options) {
      out += sep + key + "=" + value;
      sep = ",";
    }
  }
  return out;
}

}  // namespace ddpx::trainer
