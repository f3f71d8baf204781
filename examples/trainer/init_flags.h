// How examples/train turns its flags and environment into InitOptions:
// rank and world size for tcp:// and file:// (--rank/--world_size, else
// RANK/WORLD_SIZE), and the job id every rank states at rendezvous
// (process_group/rendezvous/job_identity.h).
#ifndef DDPX_EXAMPLES_TRAINER_INIT_FLAGS_H_
#define DDPX_EXAMPLES_TRAINER_INIT_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "process_group/rendezvous/init.h"
#include "process_group/rendezvous/launch_env.h"

namespace ddpx::trainer {

struct InitFlags {
  std::string init_method;  // --init
  int rank = -1;            // --rank (-1: unset)
  int world_size = -1;      // --world_size (-1: unset)
  std::string job_id;       // --job_id ("": unset)
};

// Fills options->init_method, rank, world_size and job_id. env:// takes
// rank and world size from the flags when both are given, else leaves them
// to init_process_group (RANK/WORLD_SIZE, SLURM_*, OMPI_*). tcp:// and
// file:// need them: from the flags, else RANK and WORLD_SIZE; the error
// says so when neither gives them, and names a malformed value.
absl::Status resolve_init_flags(const InitFlags& flags, const EnvLookup& env,
                                InitOptions* options);

// The job id when --job_id is unset: SLURM_JOB_ID (with ".<SLURM_STEP_ID>"
// when set), else TORCHELASTIC_RUN_ID, else "".
std::string job_id_from_env(const EnvLookup& env);

// A job id for the ranks one local launch starts: host, launcher pid and
// start time, so two launches never share one.
std::string new_local_job_id();

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_INIT_FLAGS_H_
