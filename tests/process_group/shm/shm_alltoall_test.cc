// alltoall on the shared-memory path (process_group/shm/alltoall.h) against
// the event-loop path on 2, 3 and 4 ranks: alltoall_base with equal and
// uneven splits (zeros, blocks of many chunks, sizes that differ per pair)
// and the list alltoall give the same bytes on both paths and the bytes
// each sender put there; split sizes that disagree fail every rank.
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/process_group/shm/shm_test_util.h"

namespace ddpx {
namespace {

using gloo_test::shm_options;
using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;

// Rows rank `from` sends rank `to` in case `c`: 0 (case 1, one pair), a
// few, and (case 2) thousands (several 4 KiB chunks), different per pair.
int64_t rows(int c, int from, int to) {
  switch (c) {
    case 0: return 5;  // equal splits
    case 1: return (from + 2 * to) % 3 == 0 ? 0 : 1 + 3 * from + to;
    default: return 1000 + 977 * from + 313 * to;
  }
}

// A byte that names its sender, receiver and place: random per sender so
// that nothing else could produce it.
uint8_t byte_at(int from, int to, int64_t i) {
  std::mt19937 gen(static_cast<uint32_t>(from * 7919 + to * 104729 + i / 64));
  return static_cast<uint8_t>(gen() + i % 64);
}

constexpr int64_t kRowBytes = 12;  // int32[3] rows

using Outputs = std::vector<std::vector<uint8_t>>;

// Each rank's alltoall_base output in case `c` under `options`.
Outputs run_case(int size, int c, const GlooOptions& options) {
  Outputs outputs(size);
  run_gloo_backends(size, [&](GlooBackend& b) {
    ASSERT_EQ(b.uses_shared_memory(), options.shared_memory) << b.shared_memory_status();
    const int me = b.rank();
    std::vector<int64_t> in_split, out_split;
    int64_t in_rows = 0, out_rows = 0;
    for (int r = 0; r < size; ++r) {
      in_split.push_back(rows(c, me, r));
      out_split.push_back(rows(c, r, me));
      in_rows += in_split.back();
      out_rows += out_split.back();
    }
    Tensor in = Tensor::zeros({in_rows, 3}, DType::kInt32);
    Tensor out = Tensor::zeros({out_rows, 3}, DType::kInt32);
    auto* p = static_cast<uint8_t*>(in.data());
    for (int r = 0; r < size; ++r) {
      for (int64_t i = 0; i < in_split[r] * kRowBytes; ++i) *p++ = byte_at(me, r, i);
    }
    // Equal splits also the way torch passes them: no split sizes at all.
    const bool unsplit = c == 0 && me % 2 == 0;
    ASSERT_TRUE(b.alltoall_base(out, in, unsplit ? std::vector<int64_t>{} : out_split,
                                unsplit ? std::vector<int64_t>{} : in_split, {})
                    ->wait()
                    .ok());
    const auto* o = static_cast<const uint8_t*>(out.data());
    outputs[me].assign(o, o + out.nbytes());
  }, options);
  return outputs;
}

class ShmAlltoall : public ::testing::TestWithParam<int> {};

TEST_P(ShmAlltoall, EqualAndUnevenSplitsMatchTheEventLoopPath) {
  const int size = GetParam();
  for (int c : {0, 1, 2}) {
    const Outputs shm = run_case(size, c, shm_options());
    const Outputs tcp = run_case(size, c, local_gloo_options());
    for (int me = 0; me < size; ++me) {
      ASSERT_EQ(shm[me], tcp[me]) << "case " << c << ", rank " << me << " of " << size;
      size_t at = 0;
      for (int from = 0; from < size; ++from) {
        for (int64_t i = 0; i < rows(c, from, me) * kRowBytes; ++i, ++at) {
          ASSERT_EQ(shm[me][at], byte_at(from, me, i))
              << "case " << c << ": rank " << me << ", byte " << i << " from rank " << from;
        }
      }
      EXPECT_EQ(at, shm[me].size());
    }
  }
}

TEST_P(ShmAlltoall, ListAlltoallMatchesTheEventLoopPath) {
  const int size = GetParam();
  auto run = [&](const GlooOptions& options) {
    Outputs outputs(size);
    run_gloo_backends(size, [&](GlooBackend& b) {
      const int me = b.rank();
      TensorList in, out;
      for (int r = 0; r < size; ++r) {
        in.push_back(Tensor::zeros({rows(2, me, r) * 3}, DType::kInt32));
        out.push_back(Tensor::zeros({rows(2, r, me) * 3}, DType::kInt32));
        auto* p = static_cast<uint8_t*>(in.back().data());
        for (size_t i = 0; i < in.back().nbytes(); ++i) p[i] = byte_at(me, r, i);
      }
      ASSERT_TRUE(b.alltoall(out, in, {})->wait().ok());
      for (const Tensor& t : out) {
        const auto* o = static_cast<const uint8_t*>(t.data());
        outputs[me].insert(outputs[me].end(), o, o + t.nbytes());
      }
    }, options);
    return outputs;
  };
  const Outputs shm = run(shm_options()), tcp = run(local_gloo_options());
  for (int me = 0; me < size; ++me) {
    ASSERT_EQ(shm[me], tcp[me]) << "rank " << me;
    size_t at = 0;
    for (int from = 0; from < size; ++from) {
      for (int64_t i = 0; i < rows(2, from, me) * kRowBytes; ++i, ++at) {
        ASSERT_EQ(shm[me][at], byte_at(from, me, i)) << "rank " << me << " from " << from;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmAlltoall, ::testing::Values(2, 3, 4));

// Rank 0 sends rank 1 two rows, rank 1 expects three: every rank fails,
// naming the pair, and the channel stays usable for the next op.
TEST(ShmAlltoall, DisagreeingSplitSizesFailEveryRankNamingThePair) {
  run_gloo_backends(3, [&](GlooBackend& b) {
    const int me = b.rank();
    std::vector<int64_t> in_split(3, 2), out_split(3, 2);
    if (me == 1) out_split[0] = 3;
    Tensor in = Tensor::zeros({6}, DType::kInt32);
    Tensor out = Tensor::zeros({me == 1 ? 7 : 6}, DType::kInt32);
    absl::Status s = b.alltoall_base(out, in, out_split, in_split, {})->wait();
    ASSERT_FALSE(s.ok()) << "rank " << me;
    EXPECT_NE(std::string(s.message()).find("rank 0 sends 8 B to rank 1, which expects 12 B"),
              std::string::npos)
        << s;
    Tensor t = Tensor::zeros({4}, DType::kInt32);
    t.data_as<int32_t>()[0] = me;
    ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
    EXPECT_EQ(t.data_as<int32_t>()[0], 3);
  }, shm_options());
}

}  // namespace
}  // namespace ddpx
