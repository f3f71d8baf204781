// Broadcast, allgather, barrier, gather, scatter and small reduce-scatters
// on sync pairs (process_group/gloo/sync_collectives.h): which sizes go
// there, exact results on both sides of the size limit and from every
// root, Gloo's classic classes on raw sync contexts, and which path an op
// took, told apart by how a silent peer makes it fail (sync pairs: Gloo's
// "Read timeout" from a blocking recv()).
#include "process_group/gloo/sync_collectives.h"

#include <cstring>
#include <thread>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "tests/process_group/gloo/gloo_test_util.h"
#include "tests/sanitizers.h"

namespace ddpx {
namespace {

using namespace ::ddpx::gloo_test;
using namespace ::ddpx::rank_threads;

constexpr size_t kMiB = size_t{1} << 20;

TEST(SyncCollectives, WhichSizesGoToSyncPairs) {
  const SyncPairLimits vm{kSyncPairMaxMessageBytes, 8 * kMiB};
  EXPECT_TRUE(broadcast_runs_on_sync_pairs(1, vm));
  EXPECT_TRUE(broadcast_runs_on_sync_pairs(kSyncPairMaxMessageBytes, vm));
  EXPECT_FALSE(broadcast_runs_on_sync_pairs(kSyncPairMaxMessageBytes + 1, vm));
  EXPECT_TRUE(allgather_runs_on_sync_pairs(kSyncPairMaxMessageBytes, 4, vm));
  EXPECT_FALSE(allgather_runs_on_sync_pairs(kSyncPairMaxMessageBytes + 1, 4, vm));
  // A chunk must fit in half the agreed send capacity (a stock kernel's).
  const SyncPairLimits stock{kSyncPairMaxMessageBytes, 425984};
  EXPECT_TRUE(allgather_runs_on_sync_pairs(212992, 4, stock));
  EXPECT_FALSE(allgather_runs_on_sync_pairs(212993, 4, stock));
  // The classic class counts output bytes in an int.
  const SyncPairLimits huge{size_t{1} << 40, size_t{1} << 41};
  EXPECT_FALSE(allgather_runs_on_sync_pairs(size_t{1} << 30, 4, huge));
  // No sync pairs (sync_max_bytes 0, or one rank): nothing goes there.
  EXPECT_FALSE(broadcast_runs_on_sync_pairs(1, {0, 0}));
  EXPECT_FALSE(allgather_runs_on_sync_pairs(1, 2, {0, 0}));
  EXPECT_TRUE(rooted_op_runs_on_sync_pairs(kSyncPairMaxMessageBytes, vm));
  EXPECT_FALSE(rooted_op_runs_on_sync_pairs(kSyncPairMaxMessageBytes + 1, vm));
  EXPECT_FALSE(rooted_op_runs_on_sync_pairs(1, {0, 0}));
}

uint8_t pattern(int source, size_t i) {
  return static_cast<uint8_t>(source * 31 + i * 7 + i / 251);
}

// Byte sizes around the limit: the sync side, the limit, the event-loop side.
const size_t kSizes[] = {1, 4099, kSyncPairMaxMessageBytes, kSyncPairMaxMessageBytes + 8};

TEST(SyncCollectives, BroadcastIsExactFromEveryRootOnBothSidesOfTheLimit) {
  for (int size : {2, 3}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (size_t bytes : kSizes) {
        for (int root = 0; root < size; ++root) {
          Tensor t = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::kUInt8);
          uint8_t* p = t.data_as<uint8_t>();
          if (b.rank() == root) {
            for (size_t i = 0; i < bytes; ++i) p[i] = pattern(root, i);
          }
          BroadcastOptions opts;
          opts.root_rank = root;
          ASSERT_WORK_OK(b.broadcast({t}, opts));
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(p[i], pattern(root, i)) << bytes << " B from root " << root << ", byte " << i;
          }
        }
      }
    });
  }
}

TEST(SyncCollectives, AllgatherIsExactOnBothSidesOfTheLimit) {
  for (int size : {2, 3, 4}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (size_t bytes : kSizes) {
        Tensor in = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::kUInt8);
        for (size_t i = 0; i < bytes; ++i) in.data_as<uint8_t>()[i] = pattern(b.rank(), i);
        Tensor out = Tensor::zeros({static_cast<int64_t>(bytes) * size}, DType::kUInt8);
        ASSERT_WORK_OK(b.allgather_into_tensor(out, in, {}));
        // The list form, into separate tensors.
        std::vector<TensorList> outs(1);
        for (int r = 0; r < size; ++r)
          outs[0].push_back(Tensor::zeros({static_cast<int64_t>(bytes)}, DType::kUInt8));
        ASSERT_WORK_OK(b.allgather(outs, {in}, {}));
        for (int r = 0; r < size; ++r) {
          const uint8_t* joined = out.data_as<uint8_t>() + r * bytes;
          const uint8_t* separate = outs[0][r].data_as<uint8_t>();
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(joined[i], pattern(r, i)) << bytes << " B, rank " << r << "'s byte " << i;
            ASSERT_EQ(separate[i], pattern(r, i))
                << bytes << " B (list), rank " << r << "'s byte " << i;
          }
        }
      }
    });
  }
}

TEST(SyncCollectives, GatherAndScatterAreExactFromEveryRootOnBothSidesOfTheLimit) {
  for (int size : {2, 3}) {
    run_gloo_backends(size, [&](GlooBackend& b) {
      for (size_t bytes : kSizes) {
        const int64_t n = static_cast<int64_t>(bytes);
        for (int root = 0; root < size; ++root) {
          const std::string what = std::to_string(bytes) + " B, root " + std::to_string(root);
          Tensor in = Tensor::zeros({n}, DType::kUInt8);
          for (size_t i = 0; i < bytes; ++i) in.data_as<uint8_t>()[i] = pattern(b.rank(), i);
          std::vector<TensorList> gathered;
          if (b.rank() == root) {
            gathered.emplace_back();
            for (int r = 0; r < size; ++r) gathered[0].push_back(Tensor::zeros({n}, DType::kUInt8));
          }
          GatherOptions gopts;
          gopts.root_rank = root;
          ASSERT_WORK_OK(b.gather(gathered, {in}, gopts));
          for (int r = 0; b.rank() == root && r < size; ++r) {
            for (size_t i = 0; i < bytes; ++i) {
              ASSERT_EQ(gathered[0][r].data_as<uint8_t>()[i], pattern(r, i))
                  << "gather " << what << ", rank " << r << "'s byte " << i;
            }
          }
          // Scatter back what the root gathered: every rank gets its own.
          Tensor out = Tensor::zeros({n}, DType::kUInt8);
          ScatterOptions sopts;
          sopts.root_rank = root;
          ASSERT_WORK_OK(b.scatter({out}, gathered, sopts));
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(out.data_as<uint8_t>()[i], pattern(b.rank(), i))
                << "scatter " << what << ", byte " << i;
          }
        }
      }
    });
  }
}

// Gloo's classic classes through our wrappers on raw sync contexts, at
// sizes no bench or table picks (odd, one byte).
TEST(SyncCollectives, ClassicClassesOnARawSyncContext) {
  constexpr int kSize = 3;
  run_raw_sync_ranks(kSize, [&](const std::shared_ptr<gloo::rendezvous::Context>& context, int r) {
    for (size_t bytes : {size_t{1}, size_t{12345}}) {
      std::vector<uint8_t> data(bytes);
      if (r == 2) {
        for (size_t i = 0; i < bytes; ++i) data[i] = pattern(2, i);
      }
      broadcast_classic(context, data.data(), bytes, /*root=*/2);
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(data[i], pattern(2, i)) << "broadcast byte " << i;
      }
      std::vector<uint8_t> in(bytes), out(bytes * kSize);
      for (size_t i = 0; i < bytes; ++i) in[i] = pattern(r, i);
      allgather_classic(context, in.data(), out.data(), bytes);
      for (int s = 0; s < kSize; ++s) {
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(out[s * bytes + i], pattern(s, i))
              << "allgather, rank " << s << "'s byte " << i;
        }
      }
      std::vector<uint8_t> gathered(r == 1 ? bytes * kSize : 0);
      gather_classic(context, in.data(), gathered.data(), bytes, /*root=*/1);
      for (int s = 0; r == 1 && s < kSize; ++s) {
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(gathered[s * bytes + i], pattern(s, i))
              << "gather, rank " << s << "'s byte " << i;
        }
      }
      std::vector<const void*> parts;
      for (int s = 0; r == 1 && s < kSize; ++s) parts.push_back(gathered.data() + s * bytes);
      std::vector<uint8_t> mine(bytes);
      scatter_classic(context, parts, mine.data(), bytes, /*root=*/1);
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(mine[i], pattern(r, i)) << "scatter byte " << i;
      barrier_classic(context);
    }
  });
}

// A silent rank 2: the op runs on sync pairs either way, and fails after
// the op's timeout, the group's (600 ms; times kSlowdown in sanitizer
// builds, as are the others) or one of its own (1500 ms, which
// the sync pairs' sockets then get), naming the op and the timeout. A rank
// that waits on the silent one itself times out (Gloo's "Read timeout"); one
// that waits on another joiner (a ring's neighbour, a barrier's root) may
// instead see that joiner close its connection after its own timeout:
// DeadlineExceeded too if that came after this rank's timeout, else
// Unavailable ("a peer may have exited"). Ranks that only send
// (`only_root_fails`: all but rank 0) may finish.
constexpr auto kGroupTimeout = std::chrono::milliseconds(600) * kSlowdown;
constexpr auto kOwnTimeout = std::chrono::milliseconds(1500) * kSlowdown;
// How late after its timeout an op may fail.
constexpr auto kSlack = std::chrono::milliseconds(2000) * kSlowdown;

void expect_silent_peer_failure(const std::function<std::shared_ptr<Work>(GlooBackend&, bool)>& op,
                                const std::string& name, bool only_root_fails = false) {
  for (bool own_timeout : {false, true}) {
    SCOPED_TRACE(name + (own_timeout ? " with its own timeout" : " with the group's timeout"));
    const auto timeout = own_timeout ? kOwnTimeout : kGroupTimeout;
    const std::string timeout_text = std::to_string(timeout.count()) + " ms";
    auto outcomes = run_with_a_silent_rank(
        3, [&](GlooBackend& b) { return op(b, own_timeout); }, local_gloo_options(), kGroupTimeout);
    int read_timeouts = 0;
    for (size_t r = 0; r < outcomes.size(); ++r) {
      if (only_root_fails && r != 0) continue;
      const absl::Status& s = outcomes[r].status;
      ASSERT_FALSE(s.ok()) << "rank " << r;
      EXPECT_NE(s.message().find(name), std::string::npos) << s;
      EXPECT_NE(s.message().find(timeout_text), std::string::npos) << s;
      EXPECT_LT(outcomes[r].elapsed, timeout + kSlack) << s;
      if (s.code() == absl::StatusCode::kUnavailable) {
        EXPECT_NE(s.message().find("Connection closed"), std::string::npos) << s;
        continue;
      }
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      // The op's own timeout, not the group's, bounded its wait.
      EXPECT_GE(outcomes[r].elapsed, timeout) << s;
      if (s.message().find("Read timeout") != std::string::npos) ++read_timeouts;
    }
    EXPECT_GE(read_timeouts, 1) << "no rank timed out on the sync pairs itself";
  }
}

TEST(SyncCollectives, SilentPeerFailsABarrierWithEitherTimeout) {
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        BarrierOptions opts;
        if (own) opts.timeout = kOwnTimeout;
        return b.barrier(opts);
      },
      "barrier");
}

TEST(SyncCollectives, SilentRootFailsABroadcastWithEitherTimeout) {
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        BroadcastOptions opts;
        opts.root_rank = 2;
        if (own) opts.timeout = kOwnTimeout;
        return b.broadcast({Tensor::zeros({1000}, DType::kFloat32)}, opts);
      },
      "broadcast");
}

TEST(SyncCollectives, SilentPeerFailsAnAllgatherWithEitherTimeout) {
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        AllgatherOptions opts;
        if (own) opts.timeout = kOwnTimeout;
        return b.allgather_into_tensor(Tensor::zeros({3000}, DType::kFloat32),
                                       Tensor::zeros({1000}, DType::kFloat32), opts);
      },
      "allgather");
}

// Gather to rank 0 waits for the silent rank 2's part; scatter from the
// silent rank 2 leaves everyone waiting.
TEST(SyncCollectives, SilentPeerFailsAGatherOrScatterWithEitherTimeout) {
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        GatherOptions opts;
        if (own) opts.timeout = kOwnTimeout;
        std::vector<TensorList> outs;
        if (b.rank() == 0)
          outs.push_back({Tensor::zeros({10}, DType::kFloat32),
                          Tensor::zeros({10}, DType::kFloat32),
                          Tensor::zeros({10}, DType::kFloat32)});
        return b.gather(outs, {Tensor::zeros({10}, DType::kFloat32)}, opts);
      },
      "gather", /*only_root_fails=*/true);
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        ScatterOptions opts;
        opts.root_rank = 2;
        if (own) opts.timeout = kOwnTimeout;
        return b.scatter({Tensor::zeros({10}, DType::kFloat32)}, {}, opts);
      },
      "scatter");
}

// Small reduce-scatters run Gloo's classic halving-doubling on sync pairs.
TEST(SyncCollectives, SilentPeerFailsAReduceScatterWithEitherTimeout) {
  expect_silent_peer_failure(
      [](GlooBackend& b, bool own) {
        ReduceScatterOptions opts;
        if (own) opts.timeout = kOwnTimeout;
        return b.reduce_scatter_tensor(Tensor::zeros({100}, DType::kFloat32),
                                       Tensor::zeros({300}, DType::kFloat32), opts);
      },
      "reduce_scatter");
}

}  // namespace
}  // namespace ddpx
