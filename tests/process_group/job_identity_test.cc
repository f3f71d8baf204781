// Job identity at rendezvous on a real in-memory store: the ranks of one job
// pass; another job id, another world size or a rank claimed twice is
// refused naming both values; a rank that comes before rank 0 waits for it.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "process_group/job_identity.h"
#include "store/hash_store.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

TEST(JobIdentityTest, RanksOfOneJobPass) {
  HashStore store;
  ASSERT_TRUE(check_job_identity(store, 0, 3, "A", milliseconds(1000)).ok());
  EXPECT_TRUE(check_job_identity(store, 1, 3, "A", milliseconds(1000)).ok());
  EXPECT_TRUE(check_job_identity(store, 2, 3, "A", milliseconds(1000)).ok());
}

TEST(JobIdentityTest, ARankBeforeRankZeroWaitsForIt) {
  HashStore store;
  absl::Status early;
  std::thread t([&] { early = check_job_identity(store, 1, 2, "A", milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(check_job_identity(store, 0, 2, "A", milliseconds(1000)).ok());
  t.join();
  EXPECT_TRUE(early.ok()) << early;
}

TEST(JobIdentityTest, AnotherJobIsRefusedNamingBoth) {
  HashStore store;
  ASSERT_TRUE(check_job_identity(store, 0, 2, "A", milliseconds(1000)).ok());
  absl::Status s = check_job_identity(store, 1, 2, "B", milliseconds(1000));
  EXPECT_EQ(s.message(),
            "job id mismatch: rank 1 belongs to job 'B', but rank 0 at this rendezvous belongs "
            "to job 'A' (two jobs on one port or file?)");
  // The refused rank claimed nothing: job A's own rank 1 still joins.
  EXPECT_TRUE(check_job_identity(store, 1, 2, "A", milliseconds(1000)).ok());
}

TEST(JobIdentityTest, AnotherWorldSizeIsRefusedNamingBoth) {
  HashStore store;
  ASSERT_TRUE(check_job_identity(store, 0, 2, "", milliseconds(1000)).ok());
  absl::Status s = check_job_identity(store, 1, 4, "", milliseconds(1000));
  EXPECT_EQ(s.message(),
            "world size mismatch: rank 1 was started with world size 4, rank 0 of job (none) "
            "with world size 2");
}

TEST(JobIdentityTest, ARankClaimedTwiceIsRefused) {
  HashStore store;
  ASSERT_TRUE(check_job_identity(store, 0, 2, "A", milliseconds(1000)).ok());
  ASSERT_TRUE(check_job_identity(store, 1, 2, "A", milliseconds(1000)).ok());
  absl::Status s = check_job_identity(store, 1, 2, "A", milliseconds(1000));
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("rank 1 of job 'A' has already joined"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsAlreadyExists(check_job_identity(store, 0, 2, "A", milliseconds(1000))));
}

TEST(JobIdentityTest, NoRankZeroTimesOutSayingWhatItWaitedFor) {
  HashStore store;
  absl::Status s = check_job_identity(store, 1, 2, "A", milliseconds(100));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("waiting for rank 0 to state the job's world size and id"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ddpx
