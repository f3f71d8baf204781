// broadcast, reduce, the allgathers, reduce-scatters, gather, scatter, the
// all-to-alls and barrier, for world sizes 1 to 5 and several dtypes,
// including zero-element tensors.
#include <cstdint>

#include "gtest/gtest.h"
#include "process_group/gloo/reduce_kernels.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using rank_threads::run_gloo_backends;
using rank_threads::wait_ok;

// A tensor whose element i is base + i, in any dtype (values stay small
// enough to be exact in bfloat16).
Tensor ramp(DType dtype, int64_t n, int base) {
  Tensor t = Tensor::zeros({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    visit_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      t.data_as<T>()[i] = static_cast<T>(static_cast<float>(base + i % 50));
    });
  }
  return t;
}

void expect_ramp(const Tensor& t, int base, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_EQ(t.item(i), base + i % 50) << what << " element " << i;
  }
}

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                             DType::kInt8,    DType::kInt64,   DType::kFloat64};

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, BroadcastFromEveryRoot) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (DType dtype : kDTypes) {
      for (int root = 0; root < size; ++root) {
        Tensor t = b.rank() == root ? ramp(dtype, 33, root * 10) : Tensor::zeros({33}, dtype);
        BroadcastOptions opts;
        opts.root_rank = root;
        ASSERT_WORK_OK(b.broadcast({t}, opts));
        expect_ramp(t, root * 10, "broadcast");
      }
    }
    Tensor empty = Tensor::zeros({0}, DType::kFloat32);
    ASSERT_WORK_OK(b.broadcast({empty}, {}));
  });
}

TEST_P(CollectivesTest, ReduceToEveryRoot) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt32}) {
      for (int root = 0; root < size; ++root) {
        Tensor t = ramp(dtype, 41, b.rank());
        ReduceOptions opts;
        opts.root_rank = root;
        opts.op = ReduceOp::MAX;
        ASSERT_WORK_OK(b.reduce({t}, opts));
        // MAX over ranks of (rank + i%50) is (size - 1 + i%50) on the root;
        // other ranks' tensors served as scratch (torch semantics).
        if (b.rank() == root) expect_ramp(t, size - 1, "reduce");
      }
    }
  });
}

TEST_P(CollectivesTest, AllgatherBothForms) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (DType dtype : kDTypes) {
      Tensor in = ramp(dtype, 19, 3 * b.rank());
      std::vector<TensorList> outs(1);
      for (int r = 0; r < size; ++r) outs[0].push_back(Tensor::zeros({19}, dtype));
      ASSERT_WORK_OK(b.allgather(outs, {in}, {}));
      for (int r = 0; r < size; ++r) expect_ramp(outs[0][r], 3 * r, "allgather");

      // Outputs that are consecutive views of one buffer are written in place.
      Tensor joined = Tensor::zeros({19 * size}, dtype);
      std::vector<TensorList> views(1);
      for (int r = 0; r < size; ++r) views[0].push_back(joined.view(19 * r, {19}));
      ASSERT_WORK_OK(b.allgather(views, {in}, {}));
      for (int r = 0; r < size; ++r) expect_ramp(joined.view(19 * r, {19}), 3 * r, "allgather views");

      Tensor flat = Tensor::zeros({19 * size}, dtype);
      ASSERT_WORK_OK(b.allgather_into_tensor(flat, in, {}));
      for (int r = 0; r < size; ++r) expect_ramp(flat.view(19 * r, {19}), 3 * r, "allgather_into_tensor");
    }
    Tensor empty_in = Tensor::zeros({0}, DType::kInt8);
    Tensor empty_out = Tensor::zeros({0}, DType::kInt8);
    ASSERT_WORK_OK(b.allgather_into_tensor(empty_out, empty_in, {}));
  });
}

TEST_P(CollectivesTest, ReduceScatterBothForms) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt64}) {
      const int64_t n = 13;
      // Chunk r of every rank holds (r + i%50); SUM over ranks = size * that.
      std::vector<TensorList> inputs(1);
      for (int r = 0; r < size; ++r) inputs[0].push_back(ramp(dtype, n, r));
      Tensor out = Tensor::zeros({n}, dtype);
      ASSERT_WORK_OK(b.reduce_scatter({out}, inputs, {}));
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.item(i), size * (b.rank() + i));

      Tensor flat = Tensor::zeros({n * size}, dtype);
      for (int r = 0; r < size; ++r) ASSERT_TRUE(flat.view(n * r, {n}).copy_from(ramp(dtype, n, r)).ok());
      Tensor out2 = Tensor::zeros({n}, dtype);
      ReduceScatterOptions opts;
      opts.op = ReduceOp::AVG;
      ASSERT_WORK_OK(b.reduce_scatter_tensor(out2, flat, opts));
      expect_ramp(out2, b.rank(), "reduce_scatter_tensor AVG");
    }
  });
}

TEST_P(CollectivesTest, GatherAndScatterFromEveryRoot) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (int root = 0; root < size; ++root) {
      Tensor in = ramp(DType::kFloat16, 9, b.rank() + root);
      std::vector<TensorList> outs;
      if (b.rank() == root) {
        outs.emplace_back();
        for (int r = 0; r < size; ++r) outs[0].push_back(Tensor::zeros({9}, DType::kFloat16));
      }
      GatherOptions g;
      g.root_rank = root;
      ASSERT_WORK_OK(b.gather(outs, {in}, g));
      if (b.rank() == root) {
        for (int r = 0; r < size; ++r) expect_ramp(outs[0][r], r + root, "gather");
      }

      std::vector<TensorList> sources;
      if (b.rank() == root) {
        sources.emplace_back();
        for (int r = 0; r < size; ++r) sources[0].push_back(ramp(DType::kInt32, 9, 100 + r));
      }
      Tensor out = Tensor::zeros({9}, DType::kInt32);
      ScatterOptions s;
      s.root_rank = root;
      ASSERT_WORK_OK(b.scatter({out}, sources, s));
      expect_ramp(out, 100 + b.rank(), "scatter");
    }
  });
}

TEST_P(CollectivesTest, AlltoallWithUnequalSizes) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    // Rank s sends (s + d + 1) elements to rank d, zero when s == d == 0.
    auto count = [](int s, int d) { return static_cast<int64_t>(s + d == 0 ? 0 : s + d + 1); };
    TensorList inputs, outputs;
    for (int d = 0; d < size; ++d) inputs.push_back(ramp(DType::kFloat32, count(b.rank(), d), 10 * b.rank() + d));
    for (int s = 0; s < size; ++s) outputs.push_back(Tensor::zeros({count(s, b.rank())}, DType::kFloat32));
    ASSERT_WORK_OK(b.alltoall(outputs, inputs, {}));
    for (int s = 0; s < size; ++s) expect_ramp(outputs[s], 10 * s + b.rank(), "alltoall");
  });
}

TEST_P(CollectivesTest, AlltoallBaseEqualAndSplitSizes) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    // Equal splits: 2 rows of 3 per peer.
    Tensor in = Tensor::zeros({2 * size, 3}, DType::kBFloat16);
    for (int d = 0; d < size; ++d) ASSERT_TRUE(in.view(6 * d, {6}).copy_from(ramp(DType::kBFloat16, 6, 10 * b.rank() + d)).ok());
    Tensor out = Tensor::zeros({2 * size, 3}, DType::kBFloat16);
    ASSERT_WORK_OK(b.alltoall_base(out, in, {}, {}, {}));
    for (int s = 0; s < size; ++s) expect_ramp(out.view(6 * s, {6}), 10 * s + b.rank(), "alltoall_base equal");

    // Split sizes in rows of 4 int64: rank s sends (d + 1) rows to rank d.
    std::vector<int64_t> in_splits, out_splits;
    int64_t in_rows = 0, out_rows = 0;
    for (int d = 0; d < size; ++d) { in_splits.push_back(d + 1); in_rows += d + 1; }
    for (int s = 0; s < size; ++s) { out_splits.push_back(b.rank() + 1); out_rows += b.rank() + 1; }
    Tensor vin = Tensor::zeros({in_rows, 4}, DType::kInt64);
    int64_t off = 0;
    for (int d = 0; d < size; ++d) {
      ASSERT_TRUE(vin.view(off, {4 * (d + 1)}).copy_from(ramp(DType::kInt64, 4 * (d + 1), 10 * b.rank() + d)).ok());
      off += 4 * (d + 1);
    }
    Tensor vout = Tensor::zeros({out_rows, 4}, DType::kInt64);
    ASSERT_WORK_OK(b.alltoall_base(vout, vin, out_splits, in_splits, {}));
    for (int s = 0; s < size; ++s) {
      expect_ramp(vout.view(4 * (b.rank() + 1) * s, {4 * (b.rank() + 1)}), 10 * s + b.rank(), "alltoall_base splits");
    }
  });
}

TEST_P(CollectivesTest, BarrierWaitsForEveryRank) {
  const int size = GetParam();
  std::atomic<int> arrived{0};
  run_gloo_backends(size, [&](GlooBackend& b) {
    // The last rank is late; nobody may leave the barrier before it arrives.
    if (b.rank() == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arrived.fetch_add(1);
    ASSERT_WORK_OK(b.barrier({}));
    EXPECT_EQ(arrived.load(), size);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Range(1, 6));

}  // namespace
}  // namespace ddpx
