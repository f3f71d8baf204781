// Job identity at rendezvous on a real in-memory store (ranks as threads):
// the ranks of one job pass; another job id, another world size or a rank
// claimed twice is refused naming both values; a rank that comes before
// rank 0 waits for it; a missing rank or rank 0 is a timeout saying so.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/job_identity.h"
#include "store/hash_store.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

// Rank 0 returns once every rank has reported: it runs on a thread.
void rank0_async(HashStore& store, int world, const std::string& job, std::thread* t,
                 absl::Status* out) {
  *t = std::thread([&store, world, job, out] {
    *out = check_job_identity(store, 0, world, job, milliseconds(5000));
  });
}

TEST(JobIdentityTest, RanksOfOneJobPass) {
  HashStore store;
  std::thread t;
  absl::Status zero;
  rank0_async(store, 3, "A", &t, &zero);
  EXPECT_TRUE(check_job_identity(store, 1, 3, "A", milliseconds(1000)).ok());
  EXPECT_TRUE(check_job_identity(store, 2, 3, "A", milliseconds(1000)).ok());
  t.join();
  EXPECT_TRUE(zero.ok()) << zero;
}

TEST(JobIdentityTest, ARankBeforeRankZeroWaitsForIt) {
  HashStore store;
  absl::Status early;
  std::thread t([&] { early = check_job_identity(store, 1, 2, "A", milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(check_job_identity(store, 0, 2, "A", milliseconds(5000)).ok());
  t.join();
  EXPECT_TRUE(early.ok()) << early;
}

TEST(JobIdentityTest, AnotherJobIsRefusedNamingBoth) {
  HashStore store;
  std::thread t;
  absl::Status zero;
  rank0_async(store, 2, "A", &t, &zero);
  absl::Status s = check_job_identity(store, 1, 2, "B", milliseconds(1000));
  EXPECT_EQ(s.message(),
            "job id mismatch: rank 1 belongs to job 'B', but rank 0 at this rendezvous belongs "
            "to job 'A' (two jobs on one port or file?)");
  // The refused rank claimed and reported nothing: job A's own rank 1 still
  // joins, and job A's rank 0 passes.
  EXPECT_TRUE(check_job_identity(store, 1, 2, "A", milliseconds(1000)).ok());
  t.join();
  EXPECT_TRUE(zero.ok()) << zero;
}

TEST(JobIdentityTest, AnotherWorldSizeFailsThatRankAndRankZeroNamingBoth) {
  HashStore store;
  std::thread t;
  absl::Status zero;
  rank0_async(store, 2, "", &t, &zero);
  absl::Status s = check_job_identity(store, 1, 4, "", milliseconds(1000));
  EXPECT_EQ(s.message(),
            "world size mismatch: rank 1 was started with world size 4, rank 0 of job (none) "
            "with world size 2");
  t.join();
  EXPECT_EQ(zero.message(),
            "world size mismatch: rank 0 was started with world size 2, rank 1 of job (none) "
            "with world size 4");
}

TEST(JobIdentityTest, ARankClaimedTwiceIsRefused) {
  HashStore store;
  std::thread t;
  absl::Status zero;
  rank0_async(store, 2, "A", &t, &zero);
  ASSERT_TRUE(check_job_identity(store, 1, 2, "A", milliseconds(1000)).ok());
  t.join();
  absl::Status s = check_job_identity(store, 1, 2, "A", milliseconds(1000));
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("rank 1 of job 'A' has already joined"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsAlreadyExists(check_job_identity(store, 0, 2, "A", milliseconds(1000))));
}

TEST(JobIdentityTest, RankZeroTimesOutNamingTheJobWhenARankNeverComes) {
  HashStore store;
  absl::Status s = check_job_identity(store, 0, 2, "A", milliseconds(100));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("waiting for the ranks of job 'A' to join"), std::string::npos) << s;
}

TEST(JobIdentityTest, WithoutRankZeroARankTimesOutSayingWhatItWaitedFor) {
  HashStore store;
  absl::Status s = check_job_identity(store, 1, 2, "A", milliseconds(100));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("waiting for rank 0 to state the job's world size and id"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ddpx
