// The ring reduce-scatter (reduce_scatter_ring.h): through the backend for
// world sizes 1 to 5, several dtypes and ops, element counts that are zero,
// odd, and larger than one segment, inputs as one tensor, as views of one
// buffer and as separate tensors, and an output lying inside the input; and
// the ring itself with tiny segments on raw Gloo contexts.
#include <memory>
#include <thread>
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "process_group/gloo/reduce_scatter_ring.h"
#include "tests/process_group/gloo/allreduce_values.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace {

using gloo_test::connect_raw_context;
using gloo_test::expected_result;
using gloo_test::input_value;
using rank_threads::run_gloo_backends;

// Rank `rank`'s input: `size` chunks of `count`, element i of the flat
// buffer is input_value(op, rank, i).
Tensor flat_input(ReduceOp op, DType dtype, int rank, int size, int64_t count) {
  return gloo_test::make_input(op, dtype, rank, count * size);
}

// Rank `rank`'s output holds element rank * count + j of the reduction.
void expect_chunk(const Tensor& out, ReduceOp op, int size, int rank,
                  const std::string& what) {
  const int64_t count = out.numel();
  for (int64_t j = 0; j < count; ++j) {
    const double want = expected_result(op, out.dtype(), size, rank * count + j);
    const double tol = out.dtype() == DType::kFloat16 || out.dtype() == DType::kBFloat16
                           ? 0.02 * std::abs(want) : 1e-9;
    ASSERT_NEAR(out.item(j), want, tol) << what << " element " << j;
  }
}

struct Case {
  DType dtype;
  ReduceOp op;
};
constexpr Case kCases[] = {
    {DType::kFloat32, ReduceOp::SUM},  {DType::kFloat64, ReduceOp::AVG},
    {DType::kBFloat16, ReduceOp::SUM}, {DType::kFloat16, ReduceOp::MAX},
    {DType::kInt32, ReduceOp::BXOR},   {DType::kInt64, ReduceOp::AVG},
    {DType::kInt8, ReduceOp::MIN},     {DType::kFloat32, ReduceOp::PRODUCT},
};
// 70001 float32 elements per rank exceed the ring's 256 KiB segment.
constexpr int64_t kCounts[] = {0, 1, 37, 70001};

class ReduceScatterTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceScatterTest, TensorFormEveryDTypeAndCount) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (const Case& k : kCases) {
      for (int64_t count : kCounts) {
        if (count > 100 && k.dtype != DType::kFloat32) continue;  // keep it quick
        Tensor in = flat_input(k.op, k.dtype, b.rank(), size, count);
        // Small inputs take Gloo's classic halving-doubling on the sync
        // pairs, large ones the ring, whatever the op's timeout.
        for (bool own_timeout : {false, true}) {
          Tensor out = Tensor::zeros({count}, k.dtype);
          ReduceScatterOptions opts;
          opts.op = k.op;
          if (own_timeout) opts.timeout = std::chrono::seconds(19);
          ASSERT_WORK_OK(b.reduce_scatter_tensor(out, in, opts));
          expect_chunk(out, k.op, size, b.rank(),
                       std::string(dtype_name(k.dtype)) + " count " + std::to_string(count) +
                           (own_timeout ? " (own timeout)" : ""));
        }
        // The input is left as it was.
        Tensor again = flat_input(k.op, k.dtype, b.rank(), size, count);
        for (int64_t i = 0; i < in.numel(); ++i) ASSERT_EQ(in.item(i), again.item(i));
      }
    }
  });
}

TEST_P(ReduceScatterTest, ListFormSeparateTensorsAndViews) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    for (int64_t count : {int64_t{0}, int64_t{13}, int64_t{70001}}) {
      Tensor flat = flat_input(ReduceOp::SUM, DType::kFloat32, b.rank(), size, count);
      TensorList views, copies;
      for (int r = 0; r < size; ++r) {
        views.push_back(flat.view(r * count, {count}));
        Tensor c = Tensor::zeros({count}, DType::kFloat32);
        ASSERT_TRUE(c.copy_from(views.back()).ok());
        copies.push_back(c);
      }
      Tensor out_views = Tensor::zeros({count}, DType::kFloat32);
      Tensor out_copies = Tensor::zeros({count}, DType::kFloat32);
      ASSERT_WORK_OK(b.reduce_scatter({out_views}, {views}, {}));
      ASSERT_WORK_OK(b.reduce_scatter({out_copies}, {copies}, {}));
      expect_chunk(out_views, ReduceOp::SUM, size, b.rank(), "views");
      expect_chunk(out_copies, ReduceOp::SUM, size, b.rank(), "separate tensors");
    }
  });
}

TEST_P(ReduceScatterTest, OutputInsideTheInput) {
  const int size = GetParam();
  run_gloo_backends(size, [&](GlooBackend& b) {
    // Small: halving-doubling; large: the ring.
    for (int64_t count : {int64_t{1001}, int64_t{40001}}) {
      Tensor in = flat_input(ReduceOp::SUM, DType::kInt64, b.rank(), size, count);
      // Torch users write into their own chunk of the input.
      Tensor out = in.view(b.rank() * count, {count});
      ASSERT_WORK_OK(b.reduce_scatter_tensor(out, in, {}));
      expect_chunk(out, ReduceOp::SUM, size, b.rank(),
                   "output aliasing the input, count " + std::to_string(count));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ReduceScatterTest, ::testing::Range(1, 6));

// The ring on plain Gloo contexts with segments of 3 elements, so chunks of
// 37 travel as 13 segments (the last one short) and the two buffers the
// ring alternates between are reused many times.
TEST(ReduceScatterRingTest, TinySegments) {
  for (int size = 2; size <= 5; ++size) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto context = connect_raw_context(r, size, *store);
        const int64_t count = 37;
        Tensor in = flat_input(ReduceOp::SUM, DType::kInt32, r, size, count);
        Tensor out = Tensor::zeros({count}, DType::kInt32);
        Tensor scratch = Tensor::zeros({count}, DType::kInt32);
        for (uint32_t tag = 0; tag < 3; ++tag) {  // back to back on one context
          ReduceScatterCall call;
          call.context = context;
          call.input = in.data();
          call.output = out.data();
          call.scratch = scratch.data();
          call.count = count;
          call.dtype = DType::kInt32;
          call.tag = tag;
          call.timeout = std::chrono::seconds(20);
          call.segment_bytes = 12;
          run_reduce_scatter_ring(call);
          expect_chunk(out, ReduceOp::SUM, size, r, "size " + std::to_string(size));
        }
      });
    }
    for (auto& t : threads) t.join();
  }
}

}  // namespace
}  // namespace ddpx
