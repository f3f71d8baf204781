// Job identity at rendezvous: before any backend connects, every rank states
// on the rendezvous store the world size it was started with, its job id
// and the settings its ranks must agree on, and claims its rank. Rank 0
// gives the verdict every rank waits for, so a job whose ranks disagree
// stops on every rank with a message naming what differs, instead of a
// backend failing later with a message that does not say why, or two jobs
// that share a port merging into one.
//
// The order on the store:
//
//   rank 0    claims rank 0; publishes its settings and "<world> <job id>";
//             reads the events of the other ranks until all have joined or
//             one is fatal; publishes the verdict ("ok" or why the job
//             stops); when the job stops, waits (up to 10 s) until the
//             ranks that joined have read it, since its process may host
//             the store
//   rank r>0  waits for rank 0's identity; compares the job id, the world
//             size and the settings (all BEFORE claiming, so a refused
//             process never takes the rank away from the process that
//             belongs there); claims rank r; posts "joined"; waits for the
//             verdict
//
// What each refusal does to the rest of the job:
//
//   another job id            only that process fails (it belongs to another
//                             job; this job's own rank can still come)
//   another world size        that process and rank 0 (the verdict fails
//                             every rank that joined), naming both values
//   other settings, same      that process and the whole job: one job id
//   non-empty job id          with two sets of settings is a misconfigured
//                             job
//   other settings, both      only that process fails at once. Without job
//   without a job id          ids a process with other settings may be a
//                             rank of another job started on the same port
//                             (ranks A0, B1, A1 started by hand), and job A
//                             must still form when its own rank 1 comes. If
//                             it never comes, rank 0's timeout error names
//                             the refusal.
//   a rank claimed twice      the second claimant at once, and every rank of
//                             the job through the verdict (the first
//                             claimant included), when the second claim
//                             comes before rank 0 gave its verdict; a claim
//                             after that fails alone (the job has formed).
#ifndef DDPX_PROCESS_GROUP_RENDEZVOUS_JOB_IDENTITY_H_
#define DDPX_PROCESS_GROUP_RENDEZVOUS_JOB_IDENTITY_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "store/store.h"

namespace ddpx {

// (name, value) pairs every rank of a job must state identically: model
// shape, hook, seed, learning rate... Compared in order; a difference is
// named by the setting's name with both values. Empty on either side (a
// program that states none): nothing is compared.
using JobSettings = std::vector<std::pair<std::string, std::string>>;

// Runs the rendezvous described above for `rank` of `world_size`. An empty
// job id is a job id like any other (it matches only ""). Every wait is
// bounded by `timeout`; errors name the job, the ranks and the values.
absl::Status check_job_identity(Store& store, int rank, int world_size,
                                const std::string& job_id, std::chrono::milliseconds timeout,
                                const JobSettings& settings = {});

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_RENDEZVOUS_JOB_IDENTITY_H_
