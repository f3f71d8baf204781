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

// Rank 0 claims rank 0, publishes "<world_size> <job_id>", then waits (up to
// `timeout`) for every rank of its world to report its world size; every
// other rank waits for rank 0's identity, compares, claims its rank and
// reports its world size (a rank of the same job with another world size
// reports it too, so both it and rank 0 fail naming both values; a rank of
// another job reports nothing). An empty job id is a job id like any other
// (it matches only "").
absl::Status check_job_identity(Store& store, int rank, int world_size,
                                const std::string& job_id, std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_JOB_IDENTITY_H_
