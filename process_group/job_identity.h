// Job identity at rendezvous: before any backend connects, every rank states
// on the rendezvous store the world size it was started with and its job id,
// and claims its rank. A rank whose world size or job differs from rank 0's,
// or whose rank is already taken, fails at once with a message naming both
// values, instead of a backend failing later with a message that does not
// say why (or two jobs that share a port merging into one).
#ifndef DDPX_PROCESS_GROUP_JOB_IDENTITY_H_
#define DDPX_PROCESS_GROUP_JOB_IDENTITY_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "store/store.h"

namespace ddpx {

// Rank 0 claims rank 0 and publishes "<world_size> <job_id>"; every other
// rank waits for that (up to `timeout`), compares, and only then claims its
// rank. An empty job id is a job id like any other (it matches only "").
absl::Status check_job_identity(Store& store, int rank, int world_size,
                                const std::string& job_id, std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_JOB_IDENTITY_H_
