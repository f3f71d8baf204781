// The watchdog's thread, with pollable "GPU work" made of atomics: work that
// finishes completes, work that overruns its timeout aborts the communicators
// and fails everything pending with the op, sequence and rank named, and a
// communicator's async error does the same.
#include "process_group/nccl/watchdog.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"

namespace ddpx {
namespace nccl {
namespace {

using std::chrono::milliseconds;

struct FakeOp {
  std::atomic<bool> done{false};
  std::mutex mu;
  bool finished = false;
  absl::Status result;
  std::atomic<int> finish_calls{0};
};

WatchedOp watched(std::shared_ptr<FakeOp> op, const char* name, uint64_t seq,
                  milliseconds timeout) {
  WatchedOp w;
  w.op_name = name;
  w.sequence = seq;
  w.rank = 3;
  w.communicator = "devices:0";
  w.timeout = timeout;
  w.poll = [op]() -> absl::StatusOr<bool> { return op->done.load(); };
  w.finish = [op](absl::Status s) {
    std::lock_guard<std::mutex> lock(op->mu);
    op->finished = true;
    op->result = s;
    op->finish_calls++;
  };
  return w;
}

bool finished(FakeOp& op) {
  std::lock_guard<std::mutex> lock(op.mu);
  return op.finished;
}

void wait_until_finished(FakeOp& op) {
  for (int i = 0; i < 2000 && !finished(op); ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(finished(op)) << "the watchdog never finished the op";
}

TEST(Watchdog, CompletesWorkOnceItIsDone) {
  std::atomic<int> aborts{0};
  Watchdog dog(milliseconds(2), [] { return absl::OkStatus(); },
               [&](const absl::Status&) { aborts++; });
  auto op = std::make_shared<FakeOp>();
  dog.watch(watched(op, "allreduce", 1, milliseconds(60000)));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(finished(*op));
  op->done = true;
  wait_until_finished(*op);
  EXPECT_TRUE(op->result.ok()) << op->result;
  EXPECT_EQ(op->finish_calls, 1);
  EXPECT_EQ(aborts, 0);
  EXPECT_EQ(dog.pending(), 0u);
}

TEST(Watchdog, TimeoutAbortsTheCommunicatorsAndNamesTheOpAndRank) {
  std::atomic<int> aborts{0};
  absl::Status abort_reason;
  std::mutex mu;
  Watchdog dog(milliseconds(2), [] { return absl::OkStatus(); },
               [&](const absl::Status& why) {
                 std::lock_guard<std::mutex> lock(mu);
                 aborts++;
                 abort_reason = why;
               });
  auto slow = std::make_shared<FakeOp>();
  auto other = std::make_shared<FakeOp>();
  dog.watch(watched(slow, "allreduce", 7, milliseconds(30)));
  dog.watch(watched(other, "broadcast", 8, milliseconds(60000)));
  wait_until_finished(*slow);
  wait_until_finished(*other);
  EXPECT_TRUE(absl::IsDeadlineExceeded(slow->result)) << slow->result;
  EXPECT_EQ(slow->result.message(),
            "nccl watchdog: allreduce (seq 7) on rank 3, communicator devices:0 did not finish "
            "within 30 ms; the communicators were aborted");
  EXPECT_TRUE(absl::IsAborted(other->result)) << other->result;
  EXPECT_NE(other->result.message().find("broadcast (seq 8)"), std::string::npos);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(aborts, 1);
  EXPECT_FALSE(dog.aborted().ok());
  // Nothing new runs on aborted communicators.
  auto late = std::make_shared<FakeOp>();
  dog.watch(watched(late, "barrier", 9, milliseconds(60000)));
  ASSERT_TRUE(finished(*late));
  EXPECT_TRUE(absl::IsAborted(late->result));
  EXPECT_NE(late->result.message().find("cannot run"), std::string::npos) << late->result;
}

TEST(Watchdog, AsyncCommunicatorErrorFailsPendingWork) {
  std::atomic<bool> broken{false};
  std::atomic<int> aborts{0};
  Watchdog dog(
      milliseconds(2),
      [&]() -> absl::Status {
        return broken ? absl::UnavailableError("rank 3: communicator devices:0 reports "
                                               "ncclRemoteError")
                      : absl::OkStatus();
      },
      [&](const absl::Status&) { aborts++; });
  auto op = std::make_shared<FakeOp>();
  dog.watch(watched(op, "reduce_scatter", 2, milliseconds(60000)));
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(finished(*op));
  broken = true;
  wait_until_finished(*op);
  EXPECT_TRUE(absl::IsAborted(op->result)) << op->result;
  EXPECT_NE(op->result.message().find("ncclRemoteError"), std::string::npos) << op->result;
  EXPECT_NE(op->result.message().find("reduce_scatter (seq 2) on rank 3"), std::string::npos);
  std::this_thread::sleep_for(milliseconds(20));  // more polls see the same error
  EXPECT_EQ(aborts, 1) << "the communicators are aborted once";
}

TEST(Watchdog, AFailedPollIsReportedWithTheOp) {
  Watchdog dog(milliseconds(2), [] { return absl::OkStatus(); }, [](const absl::Status&) {});
  auto op = std::make_shared<FakeOp>();
  WatchedOp w = watched(op, "send", 4, milliseconds(60000));
  w.poll = []() -> absl::StatusOr<bool> {
    return absl::InternalError("CUDA call cudaEventQuery(e) failed: cudaErrorLaunchFailure");
  };
  dog.watch(std::move(w));
  wait_until_finished(*op);
  EXPECT_TRUE(absl::IsInternal(op->result));
  EXPECT_NE(op->result.message().find("send (seq 4) on rank 3"), std::string::npos);
  EXPECT_NE(op->result.message().find("cudaErrorLaunchFailure"), std::string::npos);
}

TEST(Watchdog, ShutdownCancelsWhatIsStillPending) {
  auto op = std::make_shared<FakeOp>();
  {
    Watchdog dog(milliseconds(50), [] { return absl::OkStatus(); }, [](const absl::Status&) {});
    dog.watch(watched(op, "alltoall", 5, milliseconds(60000)));
  }
  ASSERT_TRUE(finished(*op));
  EXPECT_TRUE(absl::IsCancelled(op->result)) << op->result;
  EXPECT_EQ(op->finish_calls, 1);
}

TEST(Watchdog, ManyThreadsWatchingWhileItPolls) {
  Watchdog dog(milliseconds(1), [] { return absl::OkStatus(); }, [](const absl::Status&) {});
  std::vector<std::shared_ptr<FakeOp>> ops;
  std::mutex ops_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto op = std::make_shared<FakeOp>();
        op->done = (i % 2 == 0);
        {
          std::lock_guard<std::mutex> lock(ops_mu);
          ops.push_back(op);
        }
        dog.watch(watched(op, "allreduce", t * 100 + i, milliseconds(60000)));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& op : ops) op->done = true;
  for (auto& op : ops) wait_until_finished(*op);
  for (auto& op : ops) {
    EXPECT_TRUE(op->result.ok());
    EXPECT_EQ(op->finish_calls, 1);
  }
}

}  // namespace
}  // namespace nccl
}  // namespace ddpx
