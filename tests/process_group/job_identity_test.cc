// Job identity at rendezvous over a real TCPStore server, each rank a thread
// with its own client connection: the ranks of one job pass; another job
// id, another world size or other settings is refused naming both values;
// a rank claimed twice fails both claimants; ranks A0, B1, A1 without a job
// id form job A; a missing rank or rank 0 is a timeout saying so.
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/rendezvous/job_identity.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

// Generous: waits that should end early end on an event, never on this.
constexpr milliseconds kLong(60000);

const JobSettings kSettingsA = {{"model", "mlp 784-16-10"}, {"seed", "0"}, {"lr", "0.05"}};
const JobSettings kSettingsB = {{"model", "mlp 784-16-10"}, {"seed", "1"}, {"lr", "0.1"}};

class JobIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TCPStoreOptions o;
    o.port = 0;
    o.is_master = true;
    o.timeout = kLong;
    auto server = TCPStore::create("127.0.0.1", o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A fresh client of the server, as a rank's process would have.
  std::unique_ptr<Store> client() {
    TCPStoreOptions o;
    o.port = server_->port();
    o.timeout = kLong;
    auto c = TCPStore::create("127.0.0.1", o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::unique_ptr<Store>(std::move(*c)) : nullptr;
  }

  absl::Status check(int rank, int world, const std::string& job,
                     const JobSettings& settings = {}, milliseconds timeout = kLong) {
    std::unique_ptr<Store> store = client();
    if (store == nullptr) return absl::InternalError("no client");
    return check_job_identity(*store, rank, world, job, timeout, settings);
  }

  // Runs check(...) on a thread; join() before reading the result.
  struct Async {
    std::thread thread;
    absl::Status status;
    void join() { thread.join(); }
  };
  std::unique_ptr<Async> async(int rank, int world, const std::string& job,
                               const JobSettings& settings = {}, milliseconds timeout = kLong) {
    auto a = std::make_unique<Async>();
    Async* raw = a.get();
    a->thread = std::thread([=] { raw->status = check(rank, world, job, settings, timeout); });
    return a;
  }

  std::unique_ptr<TCPStore> server_;
};

TEST_F(JobIdentityTest, RanksOfOneJobPass) {
  auto zero = async(0, 3, "A", kSettingsA);
  auto one = async(1, 3, "A", kSettingsA);
  EXPECT_TRUE(check(2, 3, "A", kSettingsA).ok());
  zero->join();
  one->join();
  EXPECT_TRUE(zero->status.ok()) << zero->status;
  EXPECT_TRUE(one->status.ok()) << one->status;
}

TEST_F(JobIdentityTest, ARankBeforeRankZeroWaitsForIt) {
  auto early = async(1, 2, "A");
  std::this_thread::sleep_for(milliseconds(50));  // not synchronization: either order passes
  EXPECT_TRUE(check(0, 2, "A").ok());
  early->join();
  EXPECT_TRUE(early->status.ok()) << early->status;
}

TEST_F(JobIdentityTest, AnotherJobIsRefusedNamingBoth) {
  auto zero = async(0, 2, "A");
  absl::Status s = check(1, 2, "B");
  EXPECT_EQ(s.message(),
            "job id mismatch: rank 1 belongs to job 'B', but rank 0 at this rendezvous belongs "
            "to job 'A' (two jobs on one port or file?)");
  // The refused rank claimed and reported nothing: job A's own rank 1 still
  // joins, and job A's rank 0 passes.
  EXPECT_TRUE(check(1, 2, "A").ok());
  zero->join();
  EXPECT_TRUE(zero->status.ok()) << zero->status;
}

TEST_F(JobIdentityTest, AnotherWorldSizeFailsThatRankAndRankZeroNamingBoth) {
  auto zero = async(0, 2, "");
  absl::Status s = check(1, 4, "");
  EXPECT_EQ(s.message(),
            "world size mismatch: rank 1 was started with world size 4, rank 0 of job (none) "
            "with world size 2");
  zero->join();
  EXPECT_EQ(zero->status.message(),
            "world size mismatch: rank 0 was started with world size 2, rank 1 of job (none) "
            "with world size 4");
}

// The ranks that already joined hear rank 0's verdict at once instead of
// waiting out their timeout in the backend.
TEST_F(JobIdentityTest, AnotherWorldSizeStopsTheRanksThatJoined) {
  auto zero = async(0, 3, "w");
  auto one = async(1, 3, "w");
  EXPECT_FALSE(check(2, 4, "w").ok());
  zero->join();
  one->join();
  EXPECT_EQ(one->status.message(),
            "rank 0 stopped job 'w' at rendezvous: world size mismatch: rank 0 was started with "
            "world size 3, rank 2 of job 'w' with world size 4");
}

// Issue 33 point 2: ranks A0, B1, A1 on one store without job ids. B1 is
// refused before it claims rank 1, naming the first differing setting; A1
// then claims rank 1 and job A forms.
TEST_F(JobIdentityTest, OtherSettingsWithoutAJobIdAreRefusedAndTheRightRankStillJoins) {
  auto a0 = async(0, 2, "", kSettingsA);
  absl::Status b1 = check(1, 2, "", kSettingsB);
  EXPECT_TRUE(absl::IsFailedPrecondition(b1)) << b1;
  EXPECT_EQ(b1.message().find("setting 'seed' differs: rank 0 has 0, this rank (1) has 1 ("), 0)
      << b1;
  EXPECT_TRUE(check(1, 2, "", kSettingsA).ok());
  a0->join();
  EXPECT_TRUE(a0->status.ok()) << a0->status;
}

TEST_F(JobIdentityTest, TheRefusalNamesTheSettingWithBothValues) {
  auto a0 = async(0, 2, "", kSettingsA);
  JobSettings other_lr = kSettingsA;
  other_lr[2].second = "0.1";
  absl::Status s = check(1, 2, "", other_lr);
  EXPECT_NE(s.message().find("setting 'lr' differs: rank 0 has 0.05, this rank (1) has 0.1"),
            std::string::npos)
      << s;
  JobSettings extra = kSettingsA;
  extra.emplace_back("hook", "fp16");
  s = check(1, 2, "", extra);
  EXPECT_NE(s.message().find("setting 'hook' differs: rank 0 has (not stated), this rank (1) "
                             "has fp16"),
            std::string::npos)
      << s;
  JobSettings fewer(kSettingsA.begin(), kSettingsA.begin() + 2);
  s = check(1, 2, "", fewer);
  EXPECT_NE(s.message().find("setting 'lr' differs: rank 0 has 0.05, this rank (1) has (not "
                             "stated)"),
            std::string::npos)
      << s;
  EXPECT_TRUE(check(1, 2, "", kSettingsA).ok());
  a0->join();
  EXPECT_TRUE(a0->status.ok()) << a0->status;
}

// A program that states no settings compares none.
TEST_F(JobIdentityTest, NoSettingsOnEitherSideCompareNothing) {
  auto a0 = async(0, 3, "", kSettingsA);
  auto a1 = async(1, 3, "", {});
  EXPECT_TRUE(check(2, 3, "", kSettingsA).ok());
  a0->join();
  a1->join();
  EXPECT_TRUE(a0->status.ok()) << a0->status;
  EXPECT_TRUE(a1->status.ok()) << a1->status;
}

// Without a job id rank 0 cannot tell a misconfigured rank from another
// job's; when its own rank never comes, the timeout names the refusal.
TEST_F(JobIdentityTest, RankZeroTimeoutNamesTheRefusedProcess) {
  auto a0 = async(0, 2, "", kSettingsA, milliseconds(3000));
  EXPECT_FALSE(check(1, 2, "", kSettingsB).ok());
  a0->join();
  EXPECT_NE(a0->status.message().find("waiting for the ranks of job (none) to join"),
            std::string::npos)
      << a0->status;
  EXPECT_NE(a0->status.message().find("not joined: rank 1"), std::string::npos) << a0->status;
  EXPECT_NE(a0->status.message().find("a process started as rank 1 was refused: setting 'seed' "
                                      "differs: rank 0 has 0, rank 1 has 1"),
            std::string::npos)
      << a0->status;
}

// With one job id, other settings mean a misconfigured job: every rank
// stops at once, well before the (long) timeout.
TEST_F(JobIdentityTest, OtherSettingsWithOneJobIdStopTheWholeJob) {
  const auto start = std::chrono::steady_clock::now();
  auto zero = async(0, 3, "A", kSettingsA);
  auto one = async(1, 3, "A", kSettingsA);
  absl::Status two = check(2, 3, "A", kSettingsB);
  zero->join();
  one->join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kLong / 2);
  EXPECT_NE(two.message().find("setting 'seed' differs: rank 0 has 0, this rank (2) has 1"),
            std::string::npos)
      << two;
  EXPECT_EQ(zero->status.message(),
            "settings mismatch in job 'A': setting 'seed' differs: rank 0 has 0, rank 2 has 1");
  EXPECT_EQ(one->status.message(),
            "rank 0 stopped job 'A' at rendezvous: settings mismatch in job 'A': setting 'seed' "
            "differs: rank 0 has 0, rank 2 has 1");
}

// Issue 33 point 2: two processes claim rank 1 before the job has formed
// (rank 2 never comes, so rank 0 cannot have given its verdict): the second
// claimant fails at once, rank 0's verdict stops the first, and rank 0
// fails too.
TEST_F(JobIdentityTest, ARankClaimedTwiceBeforeTheVerdictFailsBothClaimants) {
  auto zero = async(0, 3, "A");
  auto first = async(1, 3, "A");
  auto second = async(1, 3, "A");
  zero->join();
  first->join();
  second->join();
  const std::string claimed = "rank 1 of job 'A' was claimed by a second process";
  EXPECT_TRUE(absl::IsAlreadyExists(zero->status)) << zero->status;
  EXPECT_NE(zero->status.message().find(claimed), std::string::npos) << zero->status;
  // Which thread claimed first is up to the scheduler: one of them was
  // refused outright, the other stopped by the verdict.
  const absl::Status& refused =
      absl::IsAlreadyExists(first->status) ? first->status : second->status;
  const absl::Status& stopped =
      absl::IsAlreadyExists(first->status) ? second->status : first->status;
  EXPECT_NE(refused.message().find("rank 1 of job 'A' has already joined"), std::string::npos)
      << refused;
  EXPECT_NE(stopped.message().find("rank 0 stopped job 'A' at rendezvous: " + claimed),
            std::string::npos)
      << stopped;
}

TEST_F(JobIdentityTest, ARankClaimedAfterTheJobFormedIsRefused) {
  auto zero = async(0, 2, "A");
  ASSERT_TRUE(check(1, 2, "A").ok());
  zero->join();
  ASSERT_TRUE(zero->status.ok()) << zero->status;
  absl::Status s = check(1, 2, "A");
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("rank 1 of job 'A' has already joined"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsAlreadyExists(check(0, 2, "A")));
}

TEST_F(JobIdentityTest, RankZeroTimesOutNamingTheJobWhenARankNeverComes) {
  absl::Status s = check(0, 3, "A", {}, milliseconds(300));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("waiting for the ranks of job 'A' to join"), std::string::npos) << s;
  EXPECT_NE(s.message().find("not joined: rank 1, 2"), std::string::npos) << s;
}

TEST_F(JobIdentityTest, WithoutRankZeroARankTimesOutSayingWhatItWaitedFor) {
  absl::Status s = check(1, 2, "A", {}, milliseconds(300));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("waiting for rank 0 to state the job's world size and id"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ddpx
