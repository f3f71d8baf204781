// The int8 (ByteGrad) hook on real Gloo ranks: identical results on every
// rank, error within the quantization bound, the exact bytes of a
// single-process simulation, and hierarchical == flat for one rank per node.
#include "hooks/int8_hook.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/bytegrad.h"
#include "hooks/int8_pipeline.h"
#include "hooks/kernels/cpu_kernels.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using hook_test::bucket_of;
using hook_test::expect_identical_across_ranks;
using rank_threads::run_groups;
using hook_test::values_of;

std::vector<float> gradient_of(int rank, int64_t n) {
  std::mt19937 rng(77 + rank);
  std::normal_distribution<float> normal(0.1f * rank, 1.0f + rank);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

// What every rank must end with, computed in one process with the same
// kernels in the documented order: the distributed hook must reproduce
// these bytes exactly (it catches chunks sent to the wrong rank, records
// read at the wrong offset, a different summation order...).
std::vector<float> simulate_bytegrad(const std::vector<std::vector<float>>& inputs) {
  const int p = static_cast<int>(inputs.size());
  const ChunkLayout layout(static_cast<int64_t>(inputs[0].size()), p);
  std::vector<float> out(inputs[0].size());
  for (int c = 0; c < p; ++c) {
    const int64_t len = layout.length(c);
    std::vector<float> acc(len, 0.0f);
    std::vector<uint8_t> record(layout.record_bytes);
    for (int r = 0; r < p; ++r) {
      kernels::quantize(inputs[r].data() + layout.begin(c), len, record.data());
      kernels::dequantize_add(record.data(), len, acc.data());
    }
    for (float& v : acc) v = v / static_cast<float>(p);
    kernels::quantize(acc.data(), len, record.data());
    kernels::dequantize(record.data(), len, out.data() + layout.begin(c));
  }
  return out;
}

// Half a step per quantization: the mean over ranks of the first
// quantization's step, plus the second's, for the chunk holding i.
void expect_within_quantization_bound(const std::vector<float>& result,
                                      const std::vector<std::vector<float>>& inputs) {
  const int p = static_cast<int>(inputs.size());
  const int64_t n = static_cast<int64_t>(result.size());
  const ChunkLayout layout(n, p);
  for (int c = 0; c < p; ++c) {
    if (layout.length(c) == 0) continue;
    const int64_t b = layout.begin(c), e = b + layout.length(c);
    double first = 0, lo = 1e300, hi = -1e300, magnitude = 0;
    std::vector<double> avg(e - b, 0.0);
    for (int r = 0; r < p; ++r) {
      auto [mn, mx] = std::minmax_element(inputs[r].begin() + b, inputs[r].begin() + e);
      first += (*mx - *mn + kernels::kQuantizeEpsilon) / 255.0 / p;
      for (int64_t i = b; i < e; ++i) {
        avg[i - b] += inputs[r][i] / static_cast<double>(p);
        magnitude = std::max(magnitude, std::fabs(static_cast<double>(inputs[r][i])));
      }
    }
    for (double v : avg) lo = std::min(lo, v), hi = std::max(hi, v);
    // The averaged chunk's range can grow by the first error at each end.
    const double second = (hi - lo + first + kernels::kQuantizeEpsilon) / 255.0;
    const double bound = 0.5 * first + 0.5 * second + 1e-6 * magnitude;
    for (int64_t i = b; i < e; ++i) {
      ASSERT_LE(std::fabs(result[i] - avg[i - b]), bound)
          << "element " << i << " of chunk " << c << " (world " << p << ")";
    }
  }
}

// Runs an int8 hook with `options` on `world` ranks and returns each rank's
// result.
std::vector<std::vector<float>> run_int8(int world, int64_t n, Int8HookOptions options,
                                         std::vector<HookStats>* stats = nullptr) {
  std::vector<std::vector<float>> results(world);
  if (stats) stats->assign(world, HookStats{});
  run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_int8_hook(pg, options);
    ASSERT_TRUE(hook.ok()) << hook.status();
    GradBucket bucket = bucket_of(gradient_of(pg->rank(), n));
    results[pg->rank()] = values_of((*hook)->run(bucket));
    // The future's tensor is the bucket's buffer, overwritten.
    EXPECT_EQ(bucket.buffer().to_float_vector(), results[pg->rank()]);
    if (stats) (*stats)[pg->rank()] = (*hook)->stats();
  });
  return results;
}

class Int8Flat : public ::testing::TestWithParam<int> {};

TEST_P(Int8Flat, AllRanksIdenticalWithinBoundAndEqualToSimulation) {
  const int world = GetParam();
  for (int64_t n : {int64_t{10007}, int64_t{3}, int64_t{64}}) {
    auto results = run_int8(world, n, {});
    expect_identical_across_ranks(results);
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world; ++r) inputs.push_back(gradient_of(r, n));
    expect_within_quantization_bound(results[0], inputs);
    std::vector<float> simulated = simulate_bytegrad(inputs);
    ASSERT_EQ(0, memcmp(simulated.data(), results[0].data(), n * 4)) << "n=" << n;
  }
}

TEST_P(Int8Flat, HierarchicalWithOneRankPerNodeEqualsFlat) {
  const int world = GetParam();
  auto flat = run_int8(world, 5003, {});
  auto hier = run_int8(world, 5003, {/*hierarchical=*/true, /*local_size=*/1});
  ASSERT_EQ(0, memcmp(flat[0].data(), hier[0].data(), 5003 * 4));
  expect_identical_across_ranks(hier);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Int8Flat, ::testing::Values(1, 2, 3, 4));

// A bucket of several pipelined pieces: ByteGrad of each piece on its own.
TEST(Int8FlatPieces, EveryPieceEqualsItsOwnSimulation) {
  const int world = 3;
  const int64_t n = 2 * Int8Pipeline::kPieceBytes / 4 + 5;
  auto results = run_int8(world, n, {});
  expect_identical_across_ranks(results);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(gradient_of(r, n));
  int64_t begin = 0;
  for (int64_t length : Int8Pipeline::piece_lengths(n, 1)) {
    const int64_t end = begin + length;
    std::vector<std::vector<float>> piece;
    for (const auto& in : inputs) piece.emplace_back(in.begin() + begin, in.begin() + end);
    std::vector<float> simulated = simulate_bytegrad(piece);
    ASSERT_EQ(0, memcmp(simulated.data(), results[0].data() + begin, (end - begin) * 4))
        << "piece at " << begin;
    begin = end;
  }
  EXPECT_EQ(begin, n);
}

// The pieces: they cover the bucket, all but the last split into L equal
// slices, none above kPieceBytes but the last (by less than L elements per
// piece), and a large bucket starts and ends with short pieces.
TEST(Int8PipelinePieces, CoverTheBucketWithShortPiecesAtBothEnds) {
  const int64_t full = Int8Pipeline::kPieceBytes / 4;
  for (int64_t local_size : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, full - 1, full + 3, 2 * full + 4099,
                      6 * full - 7, int64_t{5825034}}) {
      std::vector<int64_t> lengths = Int8Pipeline::piece_lengths(n, local_size);
      ASSERT_FALSE(lengths.empty());
      int64_t sum = 0;
      for (size_t i = 0; i < lengths.size(); ++i) {
        sum += lengths[i];
        EXPECT_GE(lengths[i], 0);
        EXPECT_LE(lengths[i], full + static_cast<int64_t>(lengths.size()) * local_size)
            << "n " << n << " L " << local_size << " piece " << i;
        if (i + 1 < lengths.size()) {
          EXPECT_EQ(lengths[i] % local_size, 0) << "piece " << i;
        }
      }
      EXPECT_EQ(sum, n) << "L " << local_size;
      if (n >= 3 * full) {  // short ends, growing towards the middle
        const int64_t end = Int8Pipeline::kEndPieceBytes / 4;
        ASSERT_GE(lengths.size(), 3u) << "n " << n;
        EXPECT_LE(lengths.front(), end);
        EXPECT_LT(lengths.back(), end + static_cast<int64_t>(lengths.size()) * local_size);
        EXPECT_GT(lengths[1], lengths.front());
        for (size_t i = 1; i < lengths.size() / 2; ++i) EXPECT_GE(lengths[i], lengths[i - 1]);
      }
    }
  }
}

TEST(Int8Stats, WireBytesAreAboutAQuarterOfAllreduce) {
  std::vector<HookStats> stats;
  const int64_t n = 100000;
  run_int8(4, n, {}, &stats);
  const int64_t record = 8 + n / 4;
  EXPECT_EQ(stats[0].calls, 1u);
  EXPECT_EQ(stats[0].input_bytes, n * 4u);
  EXPECT_EQ(stats[0].payload_bytes, 4u * record + record);
  EXPECT_EQ(stats[0].wire_bytes, 3u * record + 3u * record);
  EXPECT_NEAR(stats[0].compression_ratio(), 4.0, 0.01);
}

// Hierarchical mode's reference: every node's average (float32, as the
// reduce-scatter and the division compute it), then, piece by piece of the
// pipeline (Int8Pipeline::piece_lengths), slice j of the piece (of L equal
// slices) exchanged with ByteGrad among the nodes.
std::vector<float> simulate_hierarchical(int world, int local_size, int64_t n) {
  const int nodes = world / local_size;
  std::vector<std::vector<float>> node_avg(nodes, std::vector<float>(n, 0.0f));
  for (int node = 0; node < nodes; ++node) {
    std::vector<std::vector<float>> g;
    for (int k = 0; k < local_size; ++k) g.push_back(gradient_of(node * local_size + k, n));
    for (int64_t i = 0; i < n; ++i) {
      float sum = g[0][i];
      for (int k = 1; k < local_size; ++k) sum += g[k][i];
      node_avg[node][i] = sum / static_cast<float>(local_size);
    }
  }
  std::vector<float> out(n);
  int64_t piece = 0;
  for (int64_t length : Int8Pipeline::piece_lengths(n, local_size)) {
    const int64_t piece_end = piece + length;
    const int64_t slice = (piece_end - piece + local_size - 1) / local_size;
    for (int64_t begin = piece; begin < piece_end; begin += slice) {
      const int64_t end = std::min(piece_end, begin + slice);
      std::vector<std::vector<float>> part;
      for (const auto& avg : node_avg) part.emplace_back(avg.begin() + begin, avg.begin() + end);
      // The padded tail of the last slice is zeros on every node.
      for (auto& p : part) p.resize(slice, 0.0f);
      std::vector<float> exchanged = simulate_bytegrad(part);
      std::copy(exchanged.begin(), exchanged.begin() + (end - begin), out.begin() + begin);
    }
    piece = piece_end;
  }
  return out;
}

TEST(Int8Hierarchical, TwoNodesOfTwoRanksAgreeAndEqualTheSliceSimulation) {
  const int64_t n = 4099;
  auto results = run_int8(4, n, {/*hierarchical=*/true, /*local_size=*/2});
  expect_identical_across_ranks(results);
  // Only the exchange across nodes is quantized: its inputs are the node
  // averages.
  std::vector<std::vector<float>> node_avg(2, std::vector<float>(n));
  for (int node = 0; node < 2; ++node) {
    auto a = gradient_of(2 * node, n), b = gradient_of(2 * node + 1, n);
    for (int64_t i = 0; i < n; ++i) node_avg[node][i] = (a[i] + b[i]) / 2.0f;
  }
  expect_within_quantization_bound(results[0], node_avg);
  std::vector<float> simulated = simulate_hierarchical(4, 2, n);
  EXPECT_EQ(0, memcmp(simulated.data(), results[0].data(), n * 4));
}

// Several pipelined pieces, the last one padded: the same bits as the
// piece-by-piece simulation on every rank.
TEST(Int8Hierarchical, PipelinedPiecesEqualThePieceSimulation) {
  const int64_t n = 2 * Int8Pipeline::kPieceBytes / 4 + 4099;
  auto results = run_int8(4, n, {/*hierarchical=*/true, /*local_size=*/2});
  expect_identical_across_ranks(results);
  std::vector<float> simulated = simulate_hierarchical(4, 2, n);
  EXPECT_EQ(0, memcmp(simulated.data(), results[0].data(), n * 4));
}

// Without local_size, the group's backend says which ranks share a host:
// here every rank is a thread of this process, so one host of 4.
TEST(Int8Hierarchical, LocalSizeComesFromTheGroupsHosts) {
  unsetenv("LOCAL_WORLD_SIZE");
  auto results = run_int8(4, 999, {/*hierarchical=*/true, /*local_size=*/0});
  expect_identical_across_ranks(results);
  std::vector<float> simulated = simulate_hierarchical(4, 4, 999);
  EXPECT_EQ(0, memcmp(simulated.data(), results[0].data(), 999 * 4));
}

TEST(Int8Errors, BadOptionsAndBucketsNameTheProblem) {
  run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto bad = make_int8_hook(pg, {true, 3});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("local size 3"), absl::string_view::npos)
        << bad.status();
    auto hook = make_int8_hook(pg, {});
    ASSERT_TRUE(hook.ok());
    Tensor doubles = Tensor::from_vector(std::vector<double>{1, 2});
    GradBucket bucket(0, true, doubles, {0}, {{2}}, {doubles});
    absl::Status s = (*hook)->run(bucket)->wait(std::chrono::seconds(5));
    EXPECT_NE(s.message().find("float64"), absl::string_view::npos) << s;
  });
}

}  // namespace
}  // namespace ddpx
