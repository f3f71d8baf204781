#include "examples/trainer/init_flags.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddpx::trainer {
namespace {

// `flag` when set (>= 0), else the variable `var`; -1 when neither.
absl::Status flag_or_env(int flag, const char* flag_name, const char* var, const EnvLookup& env,
                         int* out) {
  *out = flag;
  if (flag >= 0) return absl::OkStatus();
  const char* v = env(var);
  if (v == nullptr) return absl::OkStatus();
  if (!absl::SimpleAtoi(v, out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(var, "='", v, "' is not a non-negative number (",
                                                   flag_name, " overrides it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status resolve_init_flags(const InitFlags& f, const EnvLookup& env, InitOptions* o) {
  o->init_method = f.init_method;
  o->job_id = f.job_id.empty() ? job_id_from_env(env) : f.job_id;
  if (f.world_size == 0 || f.world_size < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world_size=", f.world_size, ": must be at least 1"));
  }
  if (absl::StartsWith(f.init_method, "env://")) {
    if ((f.rank >= 0) != (f.world_size >= 1)) {
      return absl::InvalidArgumentError(
          "--init=env://: give both --rank and --world_size, or neither (then they come from "
          "RANK/WORLD_SIZE, SLURM_* or OMPI_*)");
    }
    o->rank = f.rank;
    o->world_size = f.world_size;
  } else {
    if (absl::Status s = flag_or_env(f.rank, "--rank", "RANK", env, &o->rank); !s.ok()) return s;
    if (absl::Status s = flag_or_env(f.world_size, "--world_size", "WORLD_SIZE", env,
                                     &o->world_size);
        !s.ok()) {
      return s;
    }
    if (o->rank < 0 || o->world_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--init=", f.init_method, " needs this process's rank and the world size: pass --rank "
          "and --world_size (or set RANK and WORLD_SIZE); missing: ",
          o->rank < 0 ? "rank" : "", o->rank < 0 && o->world_size < 1 ? " and " : "",
          o->world_size < 1 ? "world size" : ""));
    }
  }
  if (o->rank >= 0 && o->rank >= o->world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", o->rank,
                                                   " is out of range for world size ",
                                                   o->world_size, " (ranks are 0..",
                                                   o->world_size - 1, ")"));
  }
  return absl::OkStatus();
}

std::string job_id_from_env(const EnvLookup& env) {
  if (const char* job = env("SLURM_JOB_ID")) {
    const char* step = env("SLURM_STEP_ID");
    return step != nullptr ? absl::StrCat("slurm-", job, ".", step) : absl::StrCat("slurm-", job);
  }
  if (const char* run = env("TORCHELASTIC_RUN_ID")) return absl::StrCat("torchelastic-", run);
  return "";
}

std::string new_local_job_id() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return absl::StrCat("local-", host, "-", getpid(), "-",
                      std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

}  // namespace ddpx::trainer
