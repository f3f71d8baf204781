// Every op of the shared-memory path, for every dtype and reduce op, on 2 to
// 4 ranks, with messages from one element to many chunks: exact results,
// the same bits on every rank, and the TCP path's results for integers.
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>

#include "gtest/gtest.h"
#include "process_group/gloo/reduce_kernels.h"
#include "tests/process_group/shm/shm_test_util.h"

namespace ddpx {
namespace {

using rank_threads::local_gloo_options;
using rank_threads::run_gloo_backends;
using gloo_test::shm_options;

// 1 element, less than a cache line per rank, data that ends in the seal's
// line or spans one to many lines of an inline box (right-aligned, any
// start within a line), the box's end in these tests (4096 B of float: with
// their 4 KiB slots a one-pass allreduce goes through the box up to there)
// and past it (4144 B), the one-pass limit's two sides, and several chunks
// of 4 KiB slots (with a short last one).
const int64_t kCounts[] = {1,    5,    28,   50,   57,        518,       1024,
                           1036, 8191, 8193, 3 * 1024 + 17, 40 * 1024 + 3};

// Small integers (exact in every dtype, fp16 and bf16 included, under every
// op for 4 ranks) that differ by rank and element.
template <typename T>
T value_for(int rank, int64_t i, ReduceOp op) {
  if (op == ReduceOp::PRODUCT) return static_cast<T>(1 + (i + rank) % 2);
  return static_cast<T>(1 + (i * 7 + rank * 3) % 11);
}

template <typename T>
T expected(int size, int64_t i, ReduceOp op) {
  using A = typename reduce_internal::Accum<T>::type;
  A acc = static_cast<A>(value_for<T>(0, i, op));
  for (int r = 1; r < size; ++r) {
    const A v = static_cast<A>(value_for<T>(r, i, op));
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: acc = acc + v; break;
      case ReduceOp::PRODUCT: acc = acc * v; break;
      case ReduceOp::MIN: acc = v < acc ? v : acc; break;
      case ReduceOp::MAX: acc = acc < v ? v : acc; break;
      default:
        if constexpr (std::is_integral_v<A>) {
          if (op == ReduceOp::BAND) acc = acc & v;
          if (op == ReduceOp::BOR) acc = acc | v;
          if (op == ReduceOp::BXOR) acc = acc ^ v;
        }
    }
  }
  if (op == ReduceOp::AVG) acc = static_cast<A>(acc / static_cast<A>(size));
  return static_cast<T>(acc);
}

template <typename T>
Tensor filled(int rank, int64_t count, ReduceOp op) {
  Tensor t = Tensor::zeros({count}, DTypeOf<T>::value);
  for (int64_t i = 0; i < count; ++i) t.data_as<T>()[i] = value_for<T>(rank, i, op);
  return t;
}

template <typename T>
void check_allreduce(GlooBackend& b, ReduceOp op) {
  for (int64_t count : kCounts) {
    Tensor t = filled<T>(b.rank(), count, op);
    AllreduceOptions o;
    o.op = op;
    ASSERT_TRUE(b.allreduce({t}, o)->wait().ok());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(static_cast<double>(t.data_as<T>()[i]),
                static_cast<double>(expected<T>(b.size(), i, op)))
          << dtype_name(t.dtype()) << " " << reduce_op_name(op) << " count " << count
          << " element " << i << " rank " << b.rank() << " of " << b.size();
    }
  }
}

template <typename T>
void check_every_op(GlooBackend& b) {
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,
                      ReduceOp::MAX}) {
    check_allreduce<T>(b, op);
  }
  if constexpr (std::is_integral_v<T>) {
    for (ReduceOp op : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) check_allreduce<T>(b, op);
  }
}

class ShmAllreduce : public ::testing::TestWithParam<int> {};

TEST_P(ShmAllreduce, EveryDtypeAndOpIsExact) {
  run_gloo_backends(GetParam(), [&](GlooBackend& b) {
    ASSERT_TRUE(b.uses_shared_memory()) << b.shared_memory_status();
    check_every_op<float>(b);
    check_every_op<double>(b);
    check_every_op<Half>(b);
    check_every_op<BFloat16>(b);
    check_every_op<int8_t>(b);
    check_every_op<uint8_t>(b);
    check_every_op<int32_t>(b);
    check_every_op<int64_t>(b);
  }, shm_options());
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmAllreduce, ::testing::Values(2, 3, 4));

// Random floats: the sums round differently in different orders, so equal
// bits on every rank show that one order was used everywhere.
TEST(ShmAllreduce, RandomFloatsGiveTheSameBitsOnEveryRank) {
  for (int size : {2, 3, 4}) {
    for (int64_t count : kCounts) {
      std::vector<std::vector<float>> results(size);
      run_gloo_backends(size, [&](GlooBackend& b) {
        std::mt19937 gen(1234 + b.rank());
        std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
        Tensor t = Tensor::zeros({count}, DType::kFloat32);
        for (int64_t i = 0; i < count; ++i) t.data_as<float>()[i] = dist(gen);
        ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
        results[b.rank()].assign(t.data_as<float>(), t.data_as<float>() + count);
      }, shm_options());
      for (int r = 1; r < size; ++r) {
        ASSERT_EQ(0, memcmp(results[0].data(), results[r].data(), count * sizeof(float)))
            << "rank " << r << " of " << size << ", " << count << " elements";
      }
    }
  }
}

// From kStreamingCopyFromBytes the output is written with streaming stores;
// with a length that is no multiple of 64 B and an output 4 B past a
// 16 B boundary, head and tail go the ordinary way.
TEST(ShmAllreduce, LargeMessagesWithStreamingStoresAreExact) {
  const int64_t count = (16 << 20) / 4 + 13;
  run_gloo_backends(3, [&](GlooBackend& b) {
    Tensor storage = Tensor::zeros({count + 1}, DType::kInt32);
    Tensor t = storage.view(1, {count});
    for (int64_t i = 0; i < count; ++i) t.data_as<int32_t>()[i] = static_cast<int32_t>(i % 1000 + b.rank());
    ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(t.data_as<int32_t>()[i], static_cast<int32_t>(3 * (i % 1000) + 3)) << i;
    }
    EXPECT_EQ(storage.data_as<int32_t>()[0], 0);
  }, shm_options(256 << 10, 4));
}

// Integer sums are exact in any order: both paths must give the same bits.
TEST(ShmAllreduce, IntegersEqualTheTcpPath) {
  const int size = 3;
  const int64_t count = 40 * 1024 + 3;
  std::vector<std::vector<int64_t>> shm(size), tcp(size);
  auto run = [&](const GlooOptions& options, std::vector<std::vector<int64_t>>& out) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      ASSERT_EQ(b.uses_shared_memory(), options.shared_memory);
      std::mt19937_64 gen(99 + b.rank());
      Tensor t = Tensor::zeros({count}, DType::kInt64);
      for (int64_t i = 0; i < count; ++i) t.data_as<int64_t>()[i] = static_cast<int64_t>(gen() >> 8);
      ASSERT_TRUE(b.allreduce({t}, {})->wait().ok());
      out[b.rank()].assign(t.data_as<int64_t>(), t.data_as<int64_t>() + count);
    }, options);
  };
  run(shm_options(), shm);
  run(local_gloo_options(), tcp);
  for (int r = 0; r < size; ++r) EXPECT_EQ(shm[r], tcp[r]) << "rank " << r;
}

TEST(ShmCollectives, BroadcastFromEveryRoot) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (int root = 0; root < size; ++root) {
        for (int64_t count : kCounts) {
          Tensor t = Tensor::zeros({count}, DType::kInt32);
          for (int64_t i = 0; i < count; ++i) t.data_as<int32_t>()[i] = b.rank() * 1000003 + i;
          BroadcastOptions o;
          o.root_rank = root;
          ASSERT_TRUE(b.broadcast({t}, o)->wait().ok());
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(t.data_as<int32_t>()[i], root * 1000003 + i) << "root " << root;
          }
        }
      }
    }, shm_options());
  }
}

// A small allreduce frees its slot with the peers' next step, whatever op
// that belongs to (collectives.cc): back-to-back small allreduces mixed with
// broadcasts from a rotating root and barriers, on one slot (which posts a
// step of its own instead) and on two. Freed too early, a fast rank would
// overwrite a slot a peer still reads and the sums would be wrong; never
// freed, or waiting for a step that comes later, the ops would time out.
// One and two slots take the split reduction chunk by chunk, three and more
// its pipeline (collectives.h); either way small and multi-chunk ops, of
// several kinds, reuse one another's slots.
TEST(ShmCollectives, SmallAllreducesMixedWithOtherOpsOnOneToFourSlots) {
  for (int slots : {1, 2, 3, 4}) {
    run_gloo_backends(3, [&](GlooBackend& b) {
      AllreduceOptions ao;
      ao.timeout = std::chrono::seconds(20);
      for (int iter = 0; iter < 300; ++iter) {
        Tensor small = Tensor::zeros({7}, DType::kInt64);
        for (int64_t i = 0; i < 7; ++i) small.data_as<int64_t>()[i] = iter * 100 + b.rank() * 10 + i;
        ASSERT_TRUE(b.allreduce({small}, ao)->wait().ok()) << "iteration " << iter;
        for (int64_t i = 0; i < 7; ++i) {
          ASSERT_EQ(small.data_as<int64_t>()[i], 3 * (iter * 100 + i) + 10 * (0 + 1 + 2))
              << "slots " << slots << " iteration " << iter << " element " << i;
        }
        if (iter % 3 == 1) {
          Tensor t = Tensor::zeros({iter % 2 == 0 ? 5 : 3000}, DType::kInt32);
          for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = b.rank() * 7919 + iter;
          BroadcastOptions bo;
          bo.root_rank = iter % 3;
          ASSERT_TRUE(b.broadcast({t}, bo)->wait().ok());
          ASSERT_EQ(t.data_as<int32_t>()[t.numel() - 1], bo.root_rank * 7919 + iter);
        }
        if (iter % 5 == 4) {
          ASSERT_TRUE(b.barrier({})->wait().ok());
        }
        if (iter % 7 == 3) {
          // 1 to 9 chunks of 4 KiB, the last one short; every other time a
          // reduce, whose non-roots keep their input.
          const int64_t count = 1100 + iter * 31;
          Tensor big = Tensor::zeros({count}, DType::kInt32);
          for (int64_t i = 0; i < count; ++i) big.data_as<int32_t>()[i] = iter + b.rank() + static_cast<int32_t>(i);
          const int root = iter % 3;
          if (iter % 2 == 0) {
            ASSERT_TRUE(b.allreduce({big}, ao)->wait().ok());
          } else {
            ReduceOptions ro;
            ro.root_rank = root;
            ASSERT_TRUE(b.reduce({big}, ro)->wait().ok());
          }
          const bool reduced = iter % 2 == 0 || b.rank() == root;
          for (int64_t i = 0; i < count; ++i) {
            const int32_t v = iter + static_cast<int32_t>(i);
            ASSERT_EQ(big.data_as<int32_t>()[i], reduced ? 3 * v + 3 : v + b.rank())
                << "slots " << slots << " iteration " << iter << " element " << i;
          }
        }
      }
    }, shm_options(4096, slots));
  }
}

TEST(ShmCollectives, ReduceToEveryRootLeavesOtherRanksAlone) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (int root = 0; root < size; ++root) {
        for (int64_t count : kCounts) {
          Tensor t = filled<int32_t>(b.rank(), count, ReduceOp::SUM);
          ReduceOptions o;
          o.root_rank = root;
          o.op = ReduceOp::MAX;
          ASSERT_TRUE(b.reduce({t}, o)->wait().ok());
          for (int64_t i = 0; i < count; ++i) {
            const int32_t want = b.rank() == root ? expected<int32_t>(size, i, ReduceOp::MAX)
                                                  : value_for<int32_t>(b.rank(), i, ReduceOp::SUM);
            ASSERT_EQ(t.data_as<int32_t>()[i], want) << "root " << root << " rank " << b.rank();
          }
        }
      }
    }, shm_options());
  }
}

TEST(ShmCollectives, AllgatherAndAllgatherIntoTensor) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (int64_t count : kCounts) {
        Tensor in = Tensor::zeros({count}, DType::kFloat64);
        for (int64_t i = 0; i < count; ++i) in.data_as<double>()[i] = b.rank() + i * 0.5;
        Tensor flat = Tensor::zeros({count * size}, DType::kFloat64);
        ASSERT_TRUE(b.allgather_into_tensor(flat, in, {})->wait().ok());
        std::vector<TensorList> outs(1);
        for (int r = 0; r < size; ++r) outs[0].push_back(Tensor::zeros({count}, DType::kFloat64));
        ASSERT_TRUE(b.allgather(outs, {in}, {})->wait().ok());
        for (int r = 0; r < size; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(flat.data_as<double>()[r * count + i], r + i * 0.5);
            ASSERT_EQ(outs[0][r].data_as<double>()[i], r + i * 0.5);
          }
        }
      }
    }, shm_options());
  }
}

TEST(ShmCollectives, ReduceScatterBothFormsAndInPlace) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (int64_t count : kCounts) {
        // Rank r's block j holds value_for(r, j * count + i).
        Tensor in = filled<int64_t>(b.rank(), count * size, ReduceOp::SUM);
        Tensor out = Tensor::zeros({count}, DType::kInt64);
        ReduceScatterOptions o;
        ASSERT_TRUE(b.reduce_scatter_tensor(out, in, o)->wait().ok());
        std::vector<TensorList> ins(1);
        for (int r = 0; r < size; ++r) ins[0].push_back(in.view(r * count, {count}).clone());
        Tensor out2 = Tensor::zeros({count}, DType::kInt64);
        ASSERT_TRUE(b.reduce_scatter({out2}, ins, o)->wait().ok());
        // The output is this rank's own block of the input.
        Tensor in_place = in.clone();
        Tensor own = in_place.view(b.rank() * count, {count});
        ASSERT_TRUE(b.reduce_scatter_tensor(own, in_place, o)->wait().ok());
        for (int64_t i = 0; i < count; ++i) {
          const int64_t want = expected<int64_t>(size, b.rank() * count + i, ReduceOp::SUM);
          ASSERT_EQ(out.data_as<int64_t>()[i], want) << "count " << count << " i " << i;
          ASSERT_EQ(out2.data_as<int64_t>()[i], want);
          ASSERT_EQ(own.data_as<int64_t>()[i], want);
        }
      }
    }, shm_options());
  }
}

TEST(ShmCollectives, CoalescedAndSeveralLocalTensors) {
  run_gloo_backends(3, [&](GlooBackend& b) {
    TensorList ts;
    for (int64_t count : kCounts) ts.push_back(filled<float>(b.rank(), count, ReduceOp::SUM));
    ASSERT_TRUE(b.allreduce_coalesced(ts, {})->wait().ok());
    for (size_t k = 0; k < ts.size(); ++k) {
      for (int64_t i = 0; i < ts[k].numel(); ++i) {
        ASSERT_EQ(ts[k].data_as<float>()[i], expected<float>(3, i, ReduceOp::SUM));
      }
    }
    // Two tensors on each rank: six contributions in all.
    Tensor a = Tensor::zeros({5000}, DType::kInt32), c = Tensor::zeros({5000}, DType::kInt32);
    for (int i = 0; i < 5000; ++i) a.data_as<int32_t>()[i] = c.data_as<int32_t>()[i] = b.rank() + i;
    ASSERT_TRUE(b.allreduce({a, c}, {})->wait().ok());
    for (int i = 0; i < 5000; ++i) {
      ASSERT_EQ(a.data_as<int32_t>()[i], 2 * (3 + 3 * i));
      ASSERT_EQ(c.data_as<int32_t>()[i], 2 * (3 + 3 * i));
    }
  }, shm_options());
}

// A rank arrives late at every barrier; nobody may leave before it arrives.
TEST(ShmCollectives, BarrierWaitsForTheLastRank) {
  std::atomic<int> arrived{0};
  run_gloo_backends(3, [&](GlooBackend& b) {
    for (int round = 1; round <= 20; ++round) {
      if (b.rank() == round % 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      arrived.fetch_add(1);
      ASSERT_TRUE(b.barrier({})->wait().ok());
      ASSERT_GE(arrived.load(), 3 * round) << "round " << round << " rank " << b.rank();
      ASSERT_TRUE(b.barrier({})->wait().ok());  // nobody starts the next round early
    }
  }, shm_options());
}

// Ops in flight on both workers and on a second group at once: each op's
// chunks stay in its own worker's channel and group's segments.
TEST(ShmCollectives, ConcurrentOpsOnTwoGroupsAndWorkersNeverCross) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto g1 = GlooBackend::create(store, r, 3, std::chrono::seconds(20), shm_options());
      auto g2 = GlooBackend::create(store, r, 3, std::chrono::seconds(20), shm_options());
      ASSERT_TRUE(g1.ok() && g2.ok());
      ASSERT_TRUE((*g1)->uses_shared_memory() && (*g2)->uses_shared_memory());
      std::vector<std::pair<Tensor, std::shared_ptr<Work>>> works;
      for (int k = 0; k < 16; ++k) {
        GlooBackend& g = k % 2 ? **g2 : **g1;
        Tensor t = Tensor::zeros({9000 + k}, DType::kInt32);
        for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = k * 100 + r + i;
        works.emplace_back(t, g.allreduce({t}, {}));
      }
      for (int k = 0; k < 16; ++k) {
        ASSERT_TRUE(works[k].second->wait().ok());
        const Tensor& t = works[k].first;
        for (int64_t i = 0; i < t.numel(); ++i) {
          ASSERT_EQ(t.data_as<int32_t>()[i], 3 * (k * 100 + i) + 3) << "op " << k;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(ShmCollectives, OffByOptionAndEnvironment) {
  GlooOptions off = shm_options();
  off.shared_memory = false;
  run_gloo_backends(2, [&](GlooBackend& b) {
    EXPECT_FALSE(b.uses_shared_memory());
    EXPECT_NE(b.shared_memory_status().find("off"), std::string::npos);
  }, off);
  setenv("DDPX_SHM", "0", 1);
  auto from_env = GlooOptions::from_env();
  ASSERT_TRUE(from_env.ok());
  EXPECT_FALSE(from_env->shared_memory);
  setenv("DDPX_SHM", "maybe", 1);
  auto bad = GlooOptions::from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DDPX_SHM"), std::string::npos);
  unsetenv("DDPX_SHM");
  ASSERT_TRUE(GlooOptions::from_env()->shared_memory);
}

}  // namespace
}  // namespace ddpx
