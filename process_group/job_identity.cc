#include "process_group/job_identity.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddpx {
namespace {

constexpr char kIdentityKey[] = "ddpx_job/identity";

std::string rank_key(int rank) { return absl::StrCat("ddpx_job/rank", rank); }
// The world size rank r of this job was started with, for rank 0 to check.
std::string world_key(int rank) { return absl::StrCat("ddpx_job/world", rank); }

std::string quoted(const std::string& job_id) {
  return job_id.empty() ? std::string("(none)") : absl::StrCat("'", job_id, "'");
}

// Each rank may join once: a second claim means two processes think they are
// this rank (a duplicate --rank, or two jobs with one id on one port/file).
absl::Status claim_rank(Store& store, int rank, const std::string& job_id) {
  absl::StatusOr<int64_t> claims = store.add(rank_key(rank), 1);
  if (!claims.ok()) return claims.status();
  if (*claims == 1) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "rank ", rank, " of job ", quoted(job_id),
      " has already joined this rendezvous store: another process was started as the same "
      "rank, another job with the same job id uses this port or file, or a file:// store is "
      "left from an earlier run (give a fresh path)"));
}

}  // namespace

absl::Status check_job_identity(Store& store, int rank, int world_size,
                                const std::string& job_id, std::chrono::milliseconds timeout) {
  const std::string mine = absl::StrCat(world_size, " ", job_id);
  if (rank == 0) {
    if (absl::Status s = claim_rank(store, 0, job_id); !s.ok()) return s;
    if (absl::Status s = store.set(kIdentityKey, Bytes(mine.begin(), mine.end())); !s.ok())
      return s;
    // Every rank of this job reports its world size, so rank 0 fails too
    // (rather than waiting out the timeout) when one was started differently.
    std::vector<std::string> keys;
    for (int r = 1; r < world_size; ++r) keys.push_back(world_key(r));
    if (keys.empty()) return absl::OkStatus();
    if (absl::Status s = store.wait(keys, timeout); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("waiting for the ranks of job ", quoted(job_id),
                                                 " to join: ", s.message()));
    }
    absl::StatusOr<std::vector<Bytes>> worlds = store.multi_get(keys);
    if (!worlds.ok()) return worlds.status();
    for (int r = 1; r < world_size; ++r) {
      const std::string theirs((*worlds)[r - 1].begin(), (*worlds)[r - 1].end());
      if (theirs != std::to_string(world_size)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "world size mismatch: rank 0 was started with world size ", world_size, ", rank ", r,
            " of job ", quoted(job_id), " with world size ", theirs));
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Bytes> got = store.get(kIdentityKey, timeout);
  if (!got.ok()) {
    return absl::Status(got.status().code(),
                        absl::StrCat("waiting for rank 0 to state the job's world size and id: ",
                                     got.status().message()));
  }
  const std::string theirs(got->begin(), got->end());
  const size_t space = theirs.find(' ');
  int their_world = -1;
  if (space == std::string::npos || !absl::SimpleAtoi(theirs.substr(0, space), &their_world)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank 0's job identity on the store is '", theirs,
        "', not '<world size> <job id>' (a store of another program?)"));
  }
  const std::string their_job = theirs.substr(space + 1);
  if (their_job != job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job id mismatch: rank ", rank, " belongs to job ", quoted(job_id),
        ", but rank 0 at this rendezvous belongs to job ", quoted(their_job),
        " (two jobs on one port or file?)"));
  }
  const std::string my_world = std::to_string(world_size);
  if (their_world != world_size) {
    if (rank < their_world) store.set(world_key(rank), Bytes(my_world.begin(), my_world.end()));
    return absl::FailedPreconditionError(absl::StrCat(
        "world size mismatch: rank ", rank, " was started with world size ", world_size,
        ", rank 0 of job ", quoted(job_id), " with world size ", their_world));
  }
  if (absl::Status s = claim_rank(store, rank, job_id); !s.ok()) return s;
  return store.set(world_key(rank), Bytes(my_world.begin(), my_world.end()));
}

}  // namespace ddpx
