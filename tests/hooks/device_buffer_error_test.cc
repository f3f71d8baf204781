// A bucket on a CUDA device, in a binary that links no CUDA kernels (the
// default build, and this target under --config=cuda too, since it does not
// link //cuda): every hook must fail with an error that names the hook, the
// device and the fix, and must not touch the buffer's memory.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/device_kernels.h"
#include "hooks/default_hooks.h"
#include "hooks/int8_hook.h"
#include "hooks/powersgd_hook.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using rank_threads::run_groups;

// The tensor claims cuda:0 but points at host memory, so a CPU code path
// that wrongly ran on it would change `host` (and a device path would need
// kernels this binary lacks).
struct FakeCudaBucket {
  std::vector<float> host = {1.5f, -2.0f, 3.25f, 7.0f};
  Tensor buffer = Tensor::from_blob(host.data(), {4}, DType::kFloat32, Device::cuda(0));
  GradBucket bucket{0, true, buffer, {0}, {{4}}, {buffer}};
};

void expect_no_kernels_error(CommHook& hook, const std::string& what) {
  FakeCudaBucket b;
  const std::vector<float> before = b.host;
  std::shared_ptr<Future<Tensor>> f = hook.run(b.bucket);
  absl::Status s = f->wait(std::chrono::seconds(30));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(), what + ": bucket buffer is on cuda:0 but this build has no CUDA "
                                "kernels (build with --config=cuda and link //cuda)");
  EXPECT_EQ(b.host, before) << what << " touched the buffer";
}

TEST(DeviceBufferWithoutKernels, NoCudaKernelsAreLinkedHere) {
  EXPECT_EQ(device_kernels(Device::Type::kCUDA), nullptr);
}

TEST(DeviceBufferWithoutKernels, EveryHookSaysHowToGetKernels) {
  run_groups(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    expect_no_kernels_error(*make_fp16_compress_hook(pg), "fp16 hook");
    expect_no_kernels_error(*make_bf16_compress_hook(pg), "bf16 hook");
    expect_no_kernels_error(*make_allreduce_hook(pg), "allreduce hook");
    expect_no_kernels_error(*fp16_compress_wrapper(make_allreduce_hook(pg)),
                            "fp16+allreduce wrapper");
    expect_no_kernels_error(*bf16_compress_wrapper(make_noop_hook()), "bf16+noop wrapper");
    absl::StatusOr<std::unique_ptr<CountingHook>> int8 = make_int8_hook(pg, {});
    ASSERT_TRUE(int8.ok()) << int8.status();
    expect_no_kernels_error(**int8, "int8 hook");
  });
}

// Both phases of both PowerSGD hooks: the allreduce before
// start_powerSGD_iter, and compression from the first step (start_iter=0
// needs error feedback and warm start off).
TEST(DeviceBufferWithoutKernels, PowerSGDHooksSayHowToGetKernels) {
  run_groups(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    const std::map<std::string, std::string> allreduce_phase = {{"start_iter", "10"}};
    const std::map<std::string, std::string> compressing = {
        {"start_iter", "0"}, {"use_error_feedback", "0"}, {"warm_start", "0"},
        {"min_compression_rate", "0.01"}};
    for (bool batched : {false, true}) {
      const std::string what = batched ? "batched_powersgd hook" : "powersgd hook";
      for (const auto* options : {&allreduce_phase, &compressing}) {
        absl::StatusOr<std::unique_ptr<CommHook>> hook =
            make_powersgd_hook(pg, *options, batched);
        ASSERT_TRUE(hook.ok()) << hook.status();
        expect_no_kernels_error(**hook, what);
        expect_no_kernels_error(**hook, what);  // and again: no state changed
      }
    }
  });
}

}  // namespace
}  // namespace ddpx
