#include "core/future.h"

#include <thread>

#include "gtest/gtest.h"
#include "core/work.h"

namespace ddpx {
namespace {

TEST(Future, ThenChainsAcrossThreads) {
  auto f = Future<int>::create();
  auto g = f->then([](int& v) { return v * 2; })->then([](int& v) {
    return absl::StatusOr<std::string>(std::to_string(v));
  });
  std::thread t([&] { f->set_value(21); });
  t.join();
  ASSERT_TRUE(g->wait(std::chrono::milliseconds(1000)).ok());
  EXPECT_EQ(g->value(), "42");
}

TEST(Future, ErrorsSkipThenAndPropagate) {
  auto f = Future<int>::create();
  bool ran = false;
  auto g = f->then([&](int& v) { ran = true; return v; });
  f->set_error(absl::UnavailableError("peer 3 went away"));
  EXPECT_FALSE(ran);
  EXPECT_EQ(g->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(g->status().message(), "peer 3 went away");
}

TEST(Future, WaitTimesOutAndFirstCompletionWins) {
  auto f = Future<int>::create();
  EXPECT_EQ(f->wait(std::chrono::milliseconds(10)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(f->set_value(1));
  EXPECT_FALSE(f->set_error(absl::InternalError("late")));
  EXPECT_EQ(f->value(), 1);
}

TEST(Future, CollectAllWaitsForEveryInput) {
  auto a = Future<int>::create(), b = Future<int>::create();
  auto all = collect_all<int>({a, b});
  a->set_value(1);
  EXPECT_FALSE(all->is_completed());
  b->set_value(2);
  EXPECT_EQ(all->value(), (std::vector<int>{1, 2}));
}

}  // namespace
// A Work done before it was handed out: done, successful, the same future
// (made when first asked for) every time, holding the outputs, and an abort
// changes nothing.
TEST(CompletedWork, IsDoneWithOneFutureOfItsOutputs) {
  Tensor t = Tensor::zeros({3}, DType::kFloat32);
  auto work = std::make_shared<CompletedWork>(OpType::kAllreduce, TensorList{t});
  EXPECT_TRUE(work->is_completed());
  EXPECT_TRUE(work->is_success());
  EXPECT_TRUE(work->wait(std::chrono::milliseconds(0)).ok());
  work->abort();
  EXPECT_TRUE(work->exception().ok());
  std::shared_ptr<Future<TensorList>> future = work->get_future();
  EXPECT_EQ(future, work->get_future());
  work.reset();
  ASSERT_TRUE(future->is_completed());
  ASSERT_EQ(future->value().size(), 1u);
  EXPECT_EQ(future->value()[0].data(), t.data());
}

// A reused Work is the later op's: its future holds the later output, and a
// future taken before keeps the earlier one.
TEST(CompletedWork, ReusedForAnotherOutputHoldsThatOutput) {
  Tensor first = Tensor::zeros({3}, DType::kFloat32);
  Tensor second = Tensor::zeros({5}, DType::kFloat32);
  auto work = std::make_shared<CompletedWork>(OpType::kAllreduce, first);
  std::shared_ptr<Future<TensorList>> before = work->get_future();
  work->reuse_for(second);
  std::shared_ptr<Future<TensorList>> after = work->get_future();
  EXPECT_NE(before, after);
  ASSERT_EQ(after->value().size(), 1u);
  EXPECT_EQ(after->value()[0].data(), second.data());
  EXPECT_EQ(after->value()[0].numel(), 5);
  EXPECT_EQ(before->value()[0].data(), first.data());
  // The same tensor again, and a view of the same storage at another offset.
  work->reuse_for(second);
  EXPECT_EQ(work->get_future()->value()[0].data(), second.data());
  Tensor tail = second.view(2, {3});
  work->reuse_for(tail);
  EXPECT_EQ(work->get_future()->value()[0].data(), tail.data());
  EXPECT_EQ(work->get_future()->value()[0].numel(), 3);
}

}  // namespace ddpx
