// A checkpoint folder belongs to one job at a time.
//
// The rank that commits checkpoints (rank 0: it makes the step folders,
// writes state.bin, the MANIFEST and `latest`, and prunes; the other ranks
// write only their hook file into a step folder rank 0 made for this save)
// holds DIR/LOCK with flock(2) from its first resume or save until it
// exits. The file names the holder ("job 'exp7' host node3 pid 4242"), so a
// second job's rank 0 is refused with a message naming the first. The kernel
// drops the lock when its holder dies (kill -9 included), so the next job
// takes the folder over without anyone removing a stale file; the holder is
// never inferred from the file's contents. On a shared filesystem the lock
// reaches across hosts where the filesystem supports flock (NFSv4, and
// Lustre or GPFS with locking on).
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_LOCK_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_LOCK_H_

#include <string>

#include "absl/status/status.h"

namespace ddpx::trainer {

inline constexpr char kLockFile[] = "LOCK";

// Creates `dir` if missing (its parent must exist) and takes DIR/LOCK for
// this process, writing `job_id`, the host and the pid into it; held until
// the process exits. Calling it again for a folder this process holds is a
// no-op. FailedPrecondition, naming the holder, when another process holds
// it; an I/O error names the file and the call.
absl::Status hold_checkpoint_lock(const std::string& dir, const std::string& job_id);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_LOCK_H_
