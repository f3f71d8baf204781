// A callback may own its group: when it releases the last reference, the
// backend is destroyed on the thread running the callback (a worker, a
// waiter that ran the op itself, or a point-to-point waiter), and that
// thread's pool cannot join it there (it detaches itself, worker_pool.h). Each case runs on
// the TCP paths and on the shared-memory one, several times, and under
// ASan and TSan in CI.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/front_end/process_group.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{20000};

// A one-shot flag a test thread can wait on.
class Flag {
 public:
  void set() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait_for(milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Runs body(rank, group) on two ranks, each a thread with the only
// reference to its own group; body takes it over.
void on_two_ranks(bool shared_memory,
                  const std::function<void(int, std::shared_ptr<ProcessGroup>)>& body) {
  GlooOptions o = rank_threads::local_gloo_options();
  o.shared_memory = shared_memory;
  rank_threads::run_groups(2, body, rank_threads::gloo_groups(o, kTimeout));
}

// The group's only reference moves into a callback of its own op, which
// releases it on whatever thread completes the op.
struct Released {
  Flag flag;
  std::atomic<bool> ok{false};
  std::thread::id thread;
};

void release_in_callback(std::shared_ptr<ProcessGroup> group,
                         const std::shared_ptr<Work>& work, Released& out) {
  work->get_future()->add_callback(
      [group = std::move(group), &out](Future<TensorList>& done) mutable {
        out.ok = done.status().ok();
        out.thread = std::this_thread::get_id();
        group.reset();  // the backend goes here, on this thread
        out.flag.set();
      });
}

class ReleaseFromCallback : public ::testing::TestWithParam<bool> {};

// Rank 1 joins late, so rank 0's op is still in flight when its callback is
// added: the op, its callback and the backend's destruction all happen on
// one of rank 0's workers.
TEST_P(ReleaseFromCallback, OnAWorker) {
  for (int round = 0; round < 3; ++round) {
    on_two_ranks(GetParam(), [&](int rank, std::shared_ptr<ProcessGroup> group) {
      Tensor t = Tensor::from_vector(std::vector<float>(1000, 1.0f));
      if (rank == 1) std::this_thread::sleep_for(milliseconds(100));
      auto work = group->allreduce({t});
      Released released;
      release_in_callback(std::move(group), work, released);
      ASSERT_TRUE(released.flag.wait_for(kTimeout)) << "rank " << rank;
      EXPECT_TRUE(released.ok.load());
      if (rank == 0) {
        EXPECT_NE(released.thread, std::this_thread::get_id());
      }
      EXPECT_EQ(t.to_float_vector()[0], 2.0f);
    });
  }
}

// The caller waits at once, which lets it run the op itself when the worker
// is idle: then the callback, and the backend's end, are on the caller's
// thread, inside the worker pool's task.
TEST_P(ReleaseFromCallback, OnTheWaitingThread) {
  for (int round = 0; round < 3; ++round) {
    on_two_ranks(GetParam(), [&](int, std::shared_ptr<ProcessGroup> group) {
      Tensor t = Tensor::from_vector(std::vector<float>(1000, 1.0f));
      auto work = group->allreduce({t});
      Released released;
      release_in_callback(std::move(group), work, released);
      EXPECT_TRUE(work->wait(kTimeout).ok());
      ASSERT_TRUE(released.flag.wait_for(kTimeout));
      EXPECT_TRUE(released.ok.load());
      EXPECT_EQ(t.to_float_vector()[0], 2.0f);
    });
  }
}

// Point-to-point ops complete on a waiter thread of their own.
TEST_P(ReleaseFromCallback, OnAPointToPointWaiter) {
  for (int round = 0; round < 3; ++round) {
    on_two_ranks(GetParam(), [&](int rank, std::shared_ptr<ProcessGroup> group) {
      Tensor t = Tensor::from_vector(std::vector<float>(100, rank == 0 ? 7.0f : 0.0f));
      std::shared_ptr<Work> work;
      if (rank == 0) {
        std::this_thread::sleep_for(milliseconds(100));
        work = group->send({t}, 1);
      } else {
        work = group->recv({t}, 0);
      }
      Released released;
      release_in_callback(std::move(group), work, released);
      ASSERT_TRUE(released.flag.wait_for(kTimeout)) << "rank " << rank;
      EXPECT_TRUE(released.ok.load());
      if (rank == 1) {
        EXPECT_NE(released.thread, std::this_thread::get_id());
        EXPECT_EQ(t.to_float_vector()[99], 7.0f);
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ReleaseFromCallback, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedMemory" : "Tcp";
                         });

}  // namespace
}  // namespace ddpx
