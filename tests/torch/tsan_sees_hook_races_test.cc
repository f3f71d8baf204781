// Built only under --config=tsan: the suppressions for libtorch
// (tests/tsan_suppressions.cc) still let ThreadSanitizer report a race in
// code that runs inside autograd, under libtorch's AccumulateGrad frames, as
// ddpx's DDP hooks do (reducer/torch/). A suppression by library, or one
// that matched AccumulateGrad, would hide this race and fail the test.
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/linear.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

// Written by a hook and by another thread, no lock; global and printed, so
// the compiler keeps every store.
int unguarded = 0;

namespace {

struct RacyHook : torch::autograd::PostAccumulateGradHook {
  void operator()(const torch::autograd::Variable&) override { unguarded = 2; }
};

void backward_through_a_racy_hook() {
  torch::nn::Linear layer(3, 2);
  torch::autograd::impl::set_post_acc_grad_hooks(layer->weight, std::make_unique<RacyHook>());
  // Relaxed atomics order nothing for TSan: the other thread's writes and
  // the hook's stay unsynchronized while both threads run.
  std::atomic<bool> started{false}, stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      unguarded = 1;
      started.store(true, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  while (!started.load(std::memory_order_relaxed)) std::this_thread::yield();
  layer->forward(torch::ones({4, 3})).sum().backward();
  stop.store(true, std::memory_order_relaxed);
  other.join();
  printf("unguarded = %d\n", unguarded);
  exit(0);  // no race reported: the test fails on the exit code
}

TEST(TsanUnderLibtorch, RaceInAnAutogradHookIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // .bazelrc's tsan config sets halt_on_error=1: TSan exits with 66.
  EXPECT_EXIT(backward_through_a_racy_hook(), ::testing::ExitedWithCode(66),
              "ThreadSanitizer: data race(.|\n)*AccumulateGrad::apply");
}

}  // namespace
