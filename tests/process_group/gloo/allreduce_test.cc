// allreduce and allreduce_coalesced: every dtype, every reduce op, world
// sizes 1 to 5 (with the size-based algorithm choice), zero-element tensors.
#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"
#include "process_group/gloo/reduce_kernels.h"
#include "tests/process_group/gloo/allreduce_values.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using rank_threads::wait_ok;
using namespace ::ddpx::gloo_test;
using namespace ::ddpx::rank_threads;

class AllreduceWorldTest : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceWorldTest, EveryDTypeAndOp) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (!op_applies(op, dtype)) continue;
        // 37 elements: not a multiple of any world size or chunk count.
        Tensor t = make_input(op, dtype, b.rank(), 37);
        AllreduceOptions opts;
        opts.op = op;
        ASSERT_WORK_OK(b.allreduce({t}, opts));
        std::string what = std::string(dtype_name(dtype)) + " " + reduce_op_name(op);
        expect_result(t, op, size, what);
      }
    }
  });
}

TEST_P(AllreduceWorldTest, ZeroElementsAndMultipleTensors) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    Tensor empty = Tensor::zeros({0}, DType::kFloat32);
    auto w = b.allreduce({empty}, {});
    ASSERT_TRUE(wait_ok(w).ok()) << w->exception();
    // Two tensors on one rank are reduced together, like torch's
    // multi-tensor allreduce: the result is the sum over ranks and tensors.
    Tensor a = Tensor::from_vector<float>({1, 2, 3});
    Tensor c = Tensor::from_vector<float>({10, 20, 30});
    ASSERT_WORK_OK(b.allreduce({a, c}, {}));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(a.item(i), 11.0 * (i + 1) * size);
      EXPECT_EQ(c.item(i), 11.0 * (i + 1) * size);
    }
  });
}

TEST_P(AllreduceWorldTest, CoalescedMatchesSeparateAllreduces) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    TensorList tensors;
    const int64_t sizes[] = {1, 0, 7, 100, 3};
    for (int64_t n : sizes) tensors.push_back(make_input(ReduceOp::SUM, DType::kFloat32, b.rank(), n));
    AllreduceOptions opts;
    opts.op = ReduceOp::AVG;
    ASSERT_WORK_OK(b.allreduce_coalesced(tensors, opts));
    for (const Tensor& t : tensors) expect_result(t, ReduceOp::AVG, size, "coalesced");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllreduceWorldTest, ::testing::Range(1, 6));

}  // namespace
}  // namespace ddpx
