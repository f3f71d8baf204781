// What the example trainers' main()s share around training: deciding
// whether this process is a rank or launches --nproc local ranks, the local
// launch itself, and the hook's identity in checkpoints.
#ifndef DDPX_EXAMPLES_TRAINER_CLI_H_
#define DDPX_EXAMPLES_TRAINER_CLI_H_

#include <string>

#include "absl/status/statusor.h"

namespace ddpx::trainer {

// Whether this process is one rank of a job (else it launches `nproc` local
// ranks): a launcher's environment (RANK, SLURM_PROCID,
// OMPI_COMM_WORLD_RANK), --rank, or a tcp:// or file:// init without
// --nproc (which then needs --rank/--world_size or RANK/WORLD_SIZE rather
// than silently training alone).
bool launched_as_rank(int rank_flag, const std::string& init_flag, int nproc_flag);

// Ranks on this machine: LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE or
// OMPI_COMM_WORLD_LOCAL_SIZE, else 1 (for splitting the cores).
int local_world_size();

// Runs `nproc` copies of this binary (/proc/self/exe) with argv's arguments
// plus --job_id when `job_id_flag` is empty, supervises them and returns
// the exit code (the message goes to stderr).
int launch_local(int nproc, const std::string& job_id_flag, int argc, char** argv);

// The hook as checkpoints name it: its spec with each part's options in
// sorted order ("powersgd:start_iter=10,rank=2" and
// "powersgd:rank=2,start_iter=10" are one hook), or "per_param".
absl::StatusOr<std::string> hook_identity(const std::string& sync, const std::string& spec);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CLI_H_
