// Small classic allreduces on sync-mode pairs (process_group/gloo/sync_pairs.h):
// which ops go there, that the pairs really are read by the caller, that
// results are the same bits as Gloo's classic classes give on event-loop
// pairs up to the size limit (where every rank of a classic ring step
// writes the whole buffer before reading), that the two contexts of a
// worker interleave, that ranks may give one op different timeouts, and
// that a silent peer still fails the op within its timeout.
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>
#include <thread>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "process_group/gloo/sync_pairs.h"
#include "tests/process_group/gloo/allreduce_values.h"
#include "tests/process_group/gloo/gloo_test_util.h"
#include "tests/sanitizers.h"

namespace ddpx {
namespace {

using namespace ::ddpx::gloo_test;
using namespace ::ddpx::rank_threads;

constexpr int64_t kLimitFloats = kSyncPairMaxMessageBytes / 4;

// net.core.wmem_max: the most SO_SNDBUF the kernel grants (208 KiB if
// unreadable, Linux's default).
size_t wmem_max() {
  std::ifstream in("/proc/sys/net/core/wmem_max");
  size_t bytes = 0;
  return in >> bytes ? bytes : 212992;
}

TEST(SyncPairs, OnlyClassicAllreducesWhoseUnreadBytesFitGoThere) {
  using A = AllreduceAlgorithm;
  const size_t MiB = 1 << 20;
  // This VM's grant (net.core.wmem_max 4 MiB, reported doubled).
  const SyncPairLimits big{kSyncPairMaxMessageBytes, 8 * MiB};
  EXPECT_TRUE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 8, 4, big));
  EXPECT_TRUE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 2 * MiB, 4, big));
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 2 * MiB + 1, 4, big));
  // The ring may run world_size - 1 whole messages ahead of a neighbour.
  EXPECT_TRUE(allreduce_runs_on_sync_pairs(A::kRing, 2 * MiB, 2, big));
  EXPECT_TRUE(allreduce_runs_on_sync_pairs(A::kRing, 1 * MiB, 5, big));
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kRing, 1 * MiB + 1, 5, big));
  // Linux's default wmem_max (208 KiB, reported as 416 KiB).
  const SyncPairLimits small{kSyncPairMaxMessageBytes, 425984};
  EXPECT_TRUE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 104 * 1024, 4, small));
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 128 * 1024, 4, small));
  // Unbound-buffer algorithms would never be read on sync pairs.
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kGlooRing, 8, 2, big));
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kGlooBcube, 8, 2, big));
  // Turned off, and an option above the cap is held to the cap.
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, 8, 2, {0, 8 * MiB}));
  EXPECT_FALSE(allreduce_runs_on_sync_pairs(A::kHalvingDoubling, kSyncPairMaxMessageBytes + 1,
                                            2, {10 * kSyncPairMaxMessageBytes, 64 * MiB}));
}

TEST(SyncPairs, PiecesOnlyWhereTheGrantAllowsLargeOnes) {
  const size_t MiB = 1 << 20;
  EXPECT_EQ(sync_piece_bytes(4, {kSyncPairMaxMessageBytes, 8 * MiB}), 2 * MiB);
  EXPECT_EQ(sync_piece_bytes(2, {1 * MiB, 8 * MiB}), 1 * MiB);  // the option's
  EXPECT_EQ(sync_piece_bytes(4, {kSyncPairMaxMessageBytes, 4 * MiB}), 1 * MiB);
  EXPECT_EQ(sync_piece_bytes(4, {kSyncPairMaxMessageBytes, 425984}), 0u);
  EXPECT_EQ(sync_piece_bytes(4, {512 * 1024, 8 * MiB}), 0u);
  EXPECT_EQ(sync_piece_bytes(4, {0, 8 * MiB}), 0u);
}

TEST(SyncPairs, SwitchesEveryPairOfARawContext) {
  constexpr int kSize = 3;
  gloo::rendezvous::HashStore store;
  std::atomic<int> switched{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      auto context = connect_raw_context(r, kSize, store);
      for (int p = 0; p < kSize; ++p) EXPECT_FALSE(pair_reads_on_calling_thread(*context, p));
      read_pairs_on_calling_thread(*context);
      for (int p = 0; p < kSize; ++p) {
        EXPECT_EQ(pair_reads_on_calling_thread(*context, p), p != r) << "rank " << r << " peer " << p;
        // What the kernel grants for the request: at most wmem_max
        // (reported doubled); an unsized pair starts at 16-32 KiB.
        if (p != r) {
          EXPECT_GE(sync_pair_send_buffer_bytes(*context, p),
                    std::min(kSyncPairSendBufferBytes, wmem_max()));
        }
      }
      // No rank closes its pairs before every rank has switched its own
      // (switching waits for a connected pair; a closed one throws).
      switched.fetch_add(1);
      while (switched.load() < kSize) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  for (auto& t : threads) t.join();
}

// Float inputs whose sums depend on the order of additions: equal bits on
// both kinds of pairs means the same algorithm ran on the same data.
Tensor order_sensitive_input(int rank, int64_t n) {
  Tensor t = Tensor::zeros({n}, DType::kFloat32);
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = 1.0f / (1 + rank + 3 * (i % 97)) + 1e-3f * rank;
  return t;
}

// Each rank's results for `algorithm` at every size, from the backend (on
// its sync pairs up to the limit), and the limits the ranks agreed on.
std::vector<std::vector<Tensor>> allreduce_results(int size, AllreduceAlgorithm algorithm,
                                                   const std::vector<int64_t>& sizes,
                                                   SyncPairLimits* limits) {
  std::vector<std::vector<Tensor>> results(size);
  GlooOptions options = local_gloo_options();
  options.allreduce_algorithm = algorithm;
  run_gloo_backends(size, [&](GlooBackend& b) {
    if (b.rank() == 0) *limits = b.sync_limits();
    for (int64_t n : sizes) {
      Tensor t = order_sensitive_input(b.rank(), n);
      ASSERT_WORK_OK(b.allreduce({t}, {}));
      results[b.rank()].push_back(t);
    }
  }, options);
  return results;
}

// The same from Gloo's classic class called raw on an event-loop context.
std::vector<std::vector<Tensor>> raw_event_loop_results(int size, AllreduceAlgorithm algorithm,
                                                        const std::vector<int64_t>& sizes) {
  std::vector<std::vector<Tensor>> results(size);
  gloo::rendezvous::HashStore store;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto context = connect_raw_context(r, size, store);
      for (int64_t n : sizes) {
        Tensor t = order_sensitive_input(r, n);
        AllreduceCall call;
        call.context = context;
        call.buffers = {t.data()};
        call.count = static_cast<size_t>(n);
        call.timeout = std::chrono::seconds(20);
        run_allreduce(algorithm, call);
        results[r].push_back(t);
      }
      // No rank closes its pairs while a peer still finishes the last op.
      done.fetch_add(1);
      while (done.load() < size) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(SyncPairs, SameBitsAsEventLoopPairsUpToTheLimit) {
  const std::vector<int64_t> sizes = {1, 3, 257, 4099, kLimitFloats};
  for (int size = 2; size <= 5; ++size) {
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRingChunked,
          AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kBcube}) {
      if (!allreduce_algorithm_supports(algorithm, size, 4)) continue;
      SCOPED_TRACE(std::string(allreduce_algorithm_name(algorithm)) + " on " +
                   std::to_string(size) + " ranks");
      SyncPairLimits limits;
      auto on_sync = allreduce_results(size, algorithm, sizes, &limits);
      auto on_loop = raw_event_loop_results(size, algorithm, sizes);
      for (int r = 0; r < size; ++r) {
        ASSERT_EQ(on_sync[r].size(), sizes.size());
        ASSERT_EQ(on_loop[r].size(), sizes.size());
        for (size_t k = 0; k < sizes.size(); ++k) {
          // Beyond what the sync pairs take, the backend runs Gloo's ring.
          if (!allreduce_runs_on_sync_pairs(algorithm, sizes[k] * 4, size, limits)) continue;
          // (Ranks may differ from each other: the classic ring adds in a
          // different order on each rank.)
          EXPECT_EQ(memcmp(on_sync[r][k].data(), on_loop[r][k].data(), on_sync[r][k].nbytes()), 0)
              << "rank " << r << ", " << sizes[k] << " floats";
        }
      }
    }
  }
}

// Small ops and large ones in pieces, some with a timeout of their own (the
// sync pairs' sockets then get it, and the next op's the group's again),
// alternate on the same workers, some waited at once (run by the caller),
// some left in flight (run by the worker).
TEST(SyncPairs, SmallAndLargeOpsInterleaveOnTheSameWorkers) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      std::vector<std::shared_ptr<Work>> in_flight;
      std::vector<Tensor> tensors;
      std::vector<ReduceOp> ops;
      for (int i = 0; i < 24; ++i) {
        const int64_t n = i % 3 == 0 ? 1 + 37 * i : (1 << 18) + 5;  // 8 B..6 KiB, 2 MiB + 40 B
        const ReduceOp op = i % 2 ? ReduceOp::MAX : ReduceOp::SUM;
        Tensor t = make_input(op, DType::kInt64, b.rank(), n);
        AllreduceOptions opts;
        opts.op = op;
        if (i % 3 == 2) opts.timeout = std::chrono::seconds(19);  // the same algorithm
        auto work = b.allreduce({t}, opts);
        if (i % 4 == 0) {
          ASSERT_WORK_OK(work);
          expect_result(t, op, size, "waited op " + std::to_string(i));
        } else {
          in_flight.push_back(work);
          tensors.push_back(t);
          ops.push_back(op);
        }
      }
      for (size_t k = 0; k < in_flight.size(); ++k) {
        ASSERT_WORK_OK(in_flight[k]);
        expect_result(tensors[k], ops[k], size, "op in flight " + std::to_string(k));
      }
    });
  }
}

Tensor filled(int64_t n, float value) { return Tensor::from_vector(std::vector<float>(n, value)); }

// The choice of algorithm never depends on an op's timeout: ranks that give
// one op different timeouts (here rank 0 the group's, the others their own)
// still run it alike, for every collective with a sync-pair path and sizes
// on both sides of the limits.
TEST(SyncPairs, RanksMayGiveOneOpDifferentTimeouts) {
  for (int size : {2, 3}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      const OpTimeout mine = b.rank() == 0 ? kUseGroupTimeout
                                           : OpTimeout(std::chrono::seconds(17 + b.rank()));
      for (int64_t n : {int64_t{2}, int64_t{5000}, 3 * kLimitFloats + 5}) {
        SCOPED_TRACE(std::to_string(n) + " floats on " + std::to_string(size) + " ranks");
        Tensor t = make_input(ReduceOp::SUM, DType::kInt64, b.rank(), n);
        AllreduceOptions all;
        all.timeout = mine;
        ASSERT_WORK_OK(b.allreduce({t}, all));
        expect_result(t, ReduceOp::SUM, size, "allreduce");

        Tensor cast = filled(n, b.rank() + 1.0f);
        BroadcastOptions from_last;
        from_last.root_rank = size - 1;
        from_last.timeout = mine;
        ASSERT_WORK_OK(b.broadcast({cast}, from_last));
        EXPECT_EQ(cast.item(n - 1), static_cast<double>(size));

        Tensor gathered = Tensor::zeros({n * size}, DType::kFloat32);
        AllgatherOptions ag;
        ag.timeout = mine;
        ASSERT_WORK_OK(b.allgather_into_tensor(
            gathered, filled(n, static_cast<float>(b.rank())), ag));
        for (int r = 0; r < size; ++r) EXPECT_EQ(gathered.item(r * n), static_cast<double>(r));

        Tensor chunk = Tensor::zeros({n}, DType::kFloat32);
        ReduceScatterOptions rs;
        rs.timeout = mine;
        ASSERT_WORK_OK(b.reduce_scatter_tensor(
            chunk, filled(n * size, 1.0f), rs));
        EXPECT_EQ(chunk.item(0), static_cast<double>(size));

        BarrierOptions bar;
        bar.timeout = mine;
        ASSERT_WORK_OK(b.barrier(bar));
      }
    });
  }
}

// A small allreduce (halving-doubling) and a large one (in pieces: the
// first writes are taken by the silent peer's kernel, the blocking read
// after them ends at the group timeout).
TEST(SyncPairs, SilentPeerFailsTheOpWithinTheGroupTimeout) {
  constexpr auto kTimeout = std::chrono::milliseconds(600) * kSlowdown;
  for (int64_t floats : {int64_t{2}, 3 * kLimitFloats + 5}) {
    SCOPED_TRACE(std::to_string(floats) + " floats");
    size_t piece_bytes = 0;
    auto outcomes = run_with_a_silent_rank(3, [&](GlooBackend& b) {
      if (b.rank() == 0) piece_bytes = b.execution_plan().sync_piece_bytes();
      return b.allreduce({Tensor::zeros({floats}, DType::kFloat32)}, {});
    }, local_gloo_options(), kTimeout);
    for (const OpOutcome& o : outcomes) {
      const absl::Status& s = o.status;
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_NE(s.message().find("allreduce"), std::string::npos) << s;
      EXPECT_NE(s.message().find(std::to_string(kTimeout.count()) + " ms"), std::string::npos)
          << s;
      // Gloo's words for a blocking recv() that hit SO_RCVTIMEO: the op ran
      // on sync pairs (event-loop pairs say "Timed out"). A large op only
      // does where the kernel grants room for pieces.
      if (floats == 2 || piece_bytes > 0) {
        EXPECT_NE(s.message().find("Read timeout"), std::string::npos) << s;
      }
      EXPECT_LT(o.elapsed, kTimeout + std::chrono::milliseconds(2000) * kSlowdown) << s;
    }
  }
}

// run_allreduce_in_pieces on raw sync contexts, with pieces far smaller
// than the message (any piece size must give the same sums): counts that
// leave a short last piece, a piece smaller than one element, two buffers
// per rank.
TEST(SyncPairs, PiecesOnARawSyncContextGiveExactResults) {
  struct Case {
    DType dtype;
    int64_t count;
    size_t piece_bytes;
  };
  for (int size : {2, 3, 4}) {
    run_raw_sync_ranks(size, [&](const std::shared_ptr<gloo::rendezvous::Context>& context, int r) {
      for (Case k : {Case{DType::kFloat32, 10007, 4098}, Case{DType::kInt64, 7, 1},
                     Case{DType::kBFloat16, 3001, 1000}, Case{DType::kFloat32, 100, 4096}}) {
        const std::string what = std::string(dtype_name(k.dtype)) + "[" +
                                 std::to_string(k.count) + "] in pieces of " +
                                 std::to_string(k.piece_bytes) + " B on " +
                                 std::to_string(size) + " ranks";
        Tensor t = make_input(ReduceOp::SUM, k.dtype, r, k.count);
        Tensor zeros = Tensor::zeros({k.count}, k.dtype);  // second local buffer
        AllreduceCall call;
        call.context = context;
        call.buffers = {t.data(), zeros.data()};
        call.count = static_cast<size_t>(k.count);
        call.dtype = k.dtype;
        run_allreduce_in_pieces(AllreduceAlgorithm::kHalvingDoubling, call, k.piece_bytes);
        expect_result(t, ReduceOp::SUM, size, what);
        expect_result(zeros, ReduceOp::SUM, size, what + ", second buffer");
      }
    });
  }
}

// The backend: every rank agrees on the limits at rendezvous, and
// allreduces larger than a piece (halving-doubling in pieces on the sync
// pairs where the kernel grants enough, else the event-loop table) are
// exact for several ops and dtypes.
TEST(SyncPairs, BackendAgreesOnLimitsAndLargeAllreducesAreExact) {
  for (int size : {2, 3, 4}) {
    std::mutex mu;
    std::vector<SyncPairLimits> seen;
    run_gloo_backends(size, [&](GlooBackend& b) {
      const SyncPairLimits limits = b.sync_limits();
      EXPECT_EQ(limits.max_bytes, kSyncPairMaxMessageBytes);
      EXPECT_GT(limits.send_capacity, 0u);
      const size_t piece_bytes = b.execution_plan().sync_piece_bytes();
      EXPECT_EQ(piece_bytes, sync_piece_bytes(size, limits));
      {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(limits);
      }
      if (b.rank() == 0) {
        printf("%d ranks: send capacity %zu B, pieces of %zu B%s\n", size,
               limits.send_capacity, piece_bytes,
               piece_bytes == 0 ? " (none: large ops use the event-loop table)" : "");
      }
      const int64_t large = 2 * std::max<int64_t>(kLimitFloats, 1 << 18) + 4321;
      for (auto [op, dtype] : {std::pair{ReduceOp::SUM, DType::kFloat32},
                               std::pair{ReduceOp::MAX, DType::kInt64},
                               std::pair{ReduceOp::AVG, DType::kFloat64},
                               std::pair{ReduceOp::SUM, DType::kBFloat16}}) {
        Tensor t = make_input(op, dtype, b.rank(), large);
        AllreduceOptions opts;
        opts.op = op;
        ASSERT_WORK_OK(b.allreduce({t}, opts));
        expect_result(t, op, size, std::string(dtype_name(dtype)) + " on " +
                                       std::to_string(size) + " ranks");
      }
    });
    ASSERT_EQ(seen.size(), static_cast<size_t>(size));
    for (const SyncPairLimits& l : seen) {
      EXPECT_EQ(l.send_capacity, seen[0].send_capacity);
      EXPECT_EQ(l.max_bytes, seen[0].max_bytes);
    }
  }
  GlooOptions off = local_gloo_options();
  off.sync_max_bytes = 0;
  run_gloo_backends(2, [&](GlooBackend& b) {
    EXPECT_EQ(b.sync_limits().send_capacity, 0u);
    EXPECT_EQ(b.execution_plan().sync_piece_bytes(), 0u);
  }, off);
}

// Ranks given different sync_max_bytes still route every op alike: they
// agree on the smallest. A 1.5 MiB allreduce is whole on sync pairs under
// 2 MiB and in pieces under 1 MiB; were the ranks to choose differently,
// it would time out.
TEST(SyncPairs, RanksWithDifferentLimitsAgreeOnTheSmallest) {
  constexpr int kSize = 3;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options = local_gloo_options();
      options.sync_max_bytes = r == 1 ? size_t{1} << 20 : kSyncPairMaxMessageBytes;
      auto backend = GlooBackend::create(store, r, kSize, std::chrono::seconds(20), options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      GlooBackend& b = **backend;
      EXPECT_EQ(b.sync_limits().max_bytes, size_t{1} << 20) << "rank " << r;
      Tensor t = make_input(ReduceOp::SUM, DType::kFloat32, r, 3 << 17);  // 1.5 MiB
      ASSERT_WORK_OK(b.allreduce({t}, {}));
      expect_result(t, ReduceOp::SUM, kSize, "rank " + std::to_string(r));
    });
  }
  for (auto& t : threads) t.join();
}

TEST(SyncPairs, LimitAboveTheCapIsAnError) {
  GlooOptions options = local_gloo_options();
  options.sync_max_bytes = kSyncPairMaxMessageBytes + 1;
  auto backend = GlooBackend::create(std::make_shared<HashStore>(), 0, 1,
                                     std::chrono::seconds(1), options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(backend.status().message().find("sync_max_bytes"), std::string::npos)
      << backend.status();
}

TEST(SyncPairs, EnvironmentVariableIsParsedAndChecked) {
  setenv("DDPX_GLOO_SYNC_MAX_BYTES", "0", 1);
  auto off = GlooOptions::from_env();
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->sync_max_bytes, 0u);
  const std::string above_cap = std::to_string(kSyncPairMaxMessageBytes + 1);
  for (const char* bad : {above_cap.c_str(), "-1", "lots"}) {
    setenv("DDPX_GLOO_SYNC_MAX_BYTES", bad, 1);
    auto parsed = GlooOptions::from_env();
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("DDPX_GLOO_SYNC_MAX_BYTES"), std::string::npos)
        << parsed.status();
  }
  unsetenv("DDPX_GLOO_SYNC_MAX_BYTES");
  auto dflt = GlooOptions::from_env();
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->sync_max_bytes, kSyncPairMaxMessageBytes);
}

}  // namespace
}  // namespace ddpx
