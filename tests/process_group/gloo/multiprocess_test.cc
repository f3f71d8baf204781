// Real multi-process jobs: ranks are forked processes meeting through a
// TCPStore, talking over TCP. A rank that dies mid-job makes the others fail
// within their timeout with a message naming the op and the timeout.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "examples/benchmarks/fork_ranks.h"
#include "gtest/gtest.h"
#include "process_group/gloo/gloo_backend.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

// Inside a child: report and count a failed check (gtest does not cross
// fork).
int failures = 0;
void check(bool ok, int rank, const std::string& what) {
  if (!ok) {
    fprintf(stderr, "rank %d: check failed: %s\n", rank, what.c_str());
    ++failures;
  }
}

absl::StatusOr<std::shared_ptr<GlooBackend>> join(int rank, int nproc, int port,
                                                  std::chrono::milliseconds timeout) {
  TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.is_master = rank == 0;
  so.num_workers = nproc;
  so.timeout = std::chrono::seconds(20);
  auto store = TCPStore::create("127.0.0.1", so);
  if (!store.ok()) return store.status();
  GlooOptions go;
  go.hostname = "127.0.0.1";
  return GlooBackend::create(std::shared_ptr<Store>(std::move(*store)), rank,
                             nproc, timeout, go);
}

void expect_all_ranks_exit_zero(const absl::StatusOr<std::vector<RankExit>>& exits) {
  ASSERT_TRUE(exits.ok()) << exits.status();
  for (const RankExit& e : *exits) {
    EXPECT_EQ(e.exit_code, 0) << "rank " << e.rank << " (signal " << e.signal << ")";
  }
}

TEST(GlooMultiProcess, CollectivesAcrossFourProcesses) {
  const int nproc = 4, port = pick_free_port();
  auto exits = fork_ranks(nproc, [&](int rank) {
    auto backend = join(rank, nproc, port, std::chrono::seconds(20));
    if (!backend.ok()) {
      fprintf(stderr, "rank %d: %s\n", rank, backend.status().ToString().c_str());
      return 2;
    }
    GlooBackend& b = **backend;
    // allreduce (default algorithm choice) of a large float32 buffer, AVG.
    Tensor big = Tensor::zeros({1 << 20}, DType::kFloat32);
    big.fill_(rank + 1);
    AllreduceOptions avg;
    avg.op = ReduceOp::AVG;
    absl::Status s = b.allreduce({big}, avg)->wait();
    check(s.ok(), rank, s.ToString());
    check(big.item(0) == 2.5 && big.item((1 << 20) - 1) == 2.5, rank, "allreduce AVG value");
    // bfloat16 SUM.
    Tensor bf = Tensor::zeros({1001}, DType::kBFloat16);
    bf.fill_(rank);
    s = b.allreduce({bf}, {})->wait();
    check(s.ok() && bf.item(1000) == 6, rank, "bfloat16 allreduce");
    // broadcast from rank 2.
    Tensor t = Tensor::zeros({333}, DType::kInt32);
    if (rank == 2) t.fill_(42);
    BroadcastOptions bo;
    bo.root_rank = 2;
    s = b.broadcast({t}, bo)->wait();
    check(s.ok() && t.item(332) == 42, rank, "broadcast");
    // allgather_into_tensor.
    Tensor in = Tensor::zeros({5}, DType::kFloat64);
    in.fill_(rank * 10);
    Tensor out = Tensor::zeros({5 * nproc}, DType::kFloat64);
    s = b.allgather_into_tensor(out, in, {})->wait();
    check(s.ok(), rank, "allgather " + s.ToString());
    for (int r = 0; r < nproc; ++r) check(out.item(5 * r + 4) == r * 10, rank, "allgather value");
    // send/recv around the ring.
    Tensor msg = Tensor::zeros({64}, DType::kUInt8), got = Tensor::zeros({64}, DType::kUInt8);
    msg.fill_(rank + 100);
    auto rw = b.recv({got}, (rank + nproc - 1) % nproc, {});
    auto sw = b.send({msg}, (rank + 1) % nproc, {});
    check(sw->wait().ok() && rw->wait().ok(), rank, "send/recv");
    check(got.item(63) == (rank + nproc - 1) % nproc + 100, rank, "recv value");
    check(b.barrier({})->wait().ok(), rank, "barrier");
    check(b.monitored_barrier({}, true)->wait().ok(), rank, "monitored_barrier");
    return failures == 0 ? 0 : 1;
  }, std::chrono::seconds(50));
  expect_all_ranks_exit_zero(exits);
}

// Rank 2 is killed (SIGKILL) in the middle of the job; ranks 0, 1 and 3 keep
// calling allreduce of `numel` floats and must fail within the op's
// timeout, naming it.
void expect_killed_rank_fails_the_others(int64_t numel) {
  const int nproc = 4, port = pick_free_port();
  constexpr int kTimeoutMs = 3000;
  auto exits = fork_ranks(nproc, [&](int rank) {
    auto backend = join(rank, nproc, port, std::chrono::milliseconds(kTimeoutMs));
    if (!backend.ok()) return 2;
    GlooBackend& b = **backend;
    Tensor t = Tensor::zeros({numel}, DType::kFloat32);
    for (int i = 0; i < 5; ++i) {
      if (!b.allreduce({t}, {})->wait().ok()) return 3;
    }
    if (rank == 2) raise(SIGKILL);
    const auto start = Clock::now();
    absl::Status s;
    for (int i = 0; i < 1000 && s.ok(); ++i) s = b.allreduce({t}, {})->wait();
    const auto elapsed = Clock::now() - start;
    check(!s.ok(), rank, "allreduce kept succeeding after rank 2 died");
    const std::string m(s.message());
    check(m.find("allreduce") != std::string::npos, rank, "message names the op: " + m);
    check(m.find("3000 ms") != std::string::npos, rank, "message names the timeout: " + m);
    check(elapsed < std::chrono::milliseconds(kTimeoutMs + 2000), rank, "failed too late: " + m);
    return failures == 0 ? 0 : 1;
  }, std::chrono::seconds(40));
  ASSERT_TRUE(exits.ok()) << exits.status();
  for (const RankExit& e : *exits) {
    if (e.rank == 2) {
      EXPECT_EQ(e.signal, SIGKILL);
    } else {
      EXPECT_EQ(e.exit_code, 0) << "rank " << e.rank;
    }
  }
}

// 256 KiB: Gloo's event-loop pairs (the unbound ring).
TEST(GlooMultiProcess, KilledRankMakesOthersFailWithinTimeout) {
  expect_killed_rank_fails_the_others(1 << 16);
}

// 8 B: halving-doubling on the sync pairs, where the survivors are blocked
// in recv() on their own thread (sync_pairs.h).
TEST(GlooMultiProcess, KilledRankFailsOthersBlockedOnSyncPairs) {
  expect_killed_rank_fails_the_others(2);
}

}  // namespace
}  // namespace ddpx
