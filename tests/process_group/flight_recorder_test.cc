// The flight recorder's ring, groups, call sites and failure messages, alone
// and behind real ProcessGroups (gloo, ranks as threads).
#include "process_group/tracing/flight_recorder.h"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "core/culprits.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

std::shared_ptr<Store> prefixed(const std::string& prefix) {
  return std::make_shared<PrefixStore>(prefix, std::make_shared<HashStore>());
}

TraceOp args_of(int64_t numel) {
  TraceOp a;
  a.add(Tensor::zeros({numel}, DType::kFloat32));
  return a;
}

TEST(FlightRecorder, KeepsTheLastCapacityEntriesInOrder) {
  FlightRecorder rec(5);
  auto store = prefixed("default_pg");
  auto g = rec.attach_group(store, nullptr, 1, 4, "gloo");
  for (int i = 0; i < 12; ++i) {
    TraceHandle h = rec.record(*g, OpType::kAllreduce, args_of(i + 1), std::chrono::seconds(3));
    ASSERT_TRUE(h);
    EXPECT_EQ(h.seq, static_cast<uint64_t>(i));
    if (i % 2 == 0) {
      rec.started(h);
      rec.completed(h);
    }
  }
  FlightRecorder::Snapshot s = rec.snapshot();
  EXPECT_EQ(s.capacity, 5u);
  EXPECT_EQ(s.recorded, 12u);
  ASSERT_EQ(s.entries.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    const TraceEntry& e = s.entries[k];
    EXPECT_EQ(e.id, 8 + k);
    EXPECT_EQ(e.seq, 7 + k);
    EXPECT_EQ(e.args.total_numel, static_cast<int64_t>(8 + k));
    EXPECT_EQ(e.args.ntensors, 1);
    EXPECT_EQ(e.args.dtypes[0], DType::kFloat32);
    EXPECT_EQ(e.timeout_ms, 3000);
    EXPECT_GT(e.enqueued_ns, 0);
    if ((e.seq % 2) == 0) {
      EXPECT_EQ(e.state, TraceState::kCompleted);
      EXPECT_LE(e.enqueued_ns, e.started_ns);
      EXPECT_LE(e.started_ns, e.ended_ns);
    } else {
      EXPECT_EQ(e.state, TraceState::kEnqueued);
      EXPECT_EQ(e.started_ns, 0);
    }
  }
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].name, "default_pg");
  EXPECT_EQ(s.groups[0].rank, 1);
  EXPECT_EQ(s.groups[0].size, 4);
  EXPECT_EQ(s.groups[0].next_seq, 12u);
}

TEST(FlightRecorder, UpdatesOfOverwrittenEntriesAreDropped) {
  FlightRecorder rec(2);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  TraceHandle old = rec.record(*g, OpType::kBarrier, {}, std::chrono::seconds(1));
  rec.record(*g, OpType::kBarrier, {}, std::chrono::seconds(1));
  rec.record(*g, OpType::kBarrier, {}, std::chrono::seconds(1));  // takes old's slot
  rec.completed(old);
  for (const TraceEntry& e : rec.snapshot().entries) {
    EXPECT_EQ(e.state, TraceState::kEnqueued) << e.id;
  }
}

TEST(FlightRecorder, CapacityZeroOrDisabledRecordsNothing) {
  FlightRecorder rec(0);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  EXPECT_FALSE(rec.enabled());
  EXPECT_FALSE(rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1)));
  EXPECT_TRUE(rec.snapshot().entries.empty());

  rec.set_capacity(3);
  EXPECT_TRUE(rec.enabled());
  EXPECT_TRUE(rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1)));
  rec.set_enabled(false);
  EXPECT_FALSE(rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1)));
  rec.set_enabled(true);
  EXPECT_EQ(rec.snapshot().entries.size(), 1u);
}

TEST(FlightRecorder, PointToPointOpsAreCountedApart) {
  FlightRecorder rec(10);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  TraceOp send = args_of(4);
  send.peer = 1;
  send.tag = 7;
  EXPECT_EQ(rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1)).seq, 0u);
  TraceHandle s = rec.record(*g, OpType::kSend, send, std::chrono::seconds(1));
  EXPECT_TRUE(s.p2p);
  EXPECT_EQ(s.seq, 0u);
  EXPECT_EQ(rec.record(*g, OpType::kBroadcast, {}, std::chrono::seconds(1)).seq, 1u);
  EXPECT_EQ(rec.record(*g, OpType::kRecv, {}, std::chrono::seconds(1)).seq, 1u);
  const TraceEntry e = rec.snapshot().entries[1];
  EXPECT_EQ(e.args.peer, 1);
  EXPECT_EQ(e.args.tag, 7);
}

TEST(FlightRecorder, GroupsAreNamedByStorePrefixAndSharedPerStore) {
  FlightRecorder rec(10);
  auto root = std::make_shared<HashStore>();
  auto dflt = std::make_shared<PrefixStore>("default_pg", root);
  auto sub = std::make_shared<PrefixStore>("int8_local", dflt);
  auto a = rec.attach_group(dflt, nullptr, 0, 2, "gloo");
  auto b = rec.attach_group(dflt, nullptr, 0, 2, "gloo");  // e.g. TimedBackend's wrapper
  auto c = rec.attach_group(sub, nullptr, 0, 2, "gloo");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(rec.group_info(a->index()).name, "default_pg");
  EXPECT_EQ(rec.group_info(c->index()).name, "default_pg/int8_local");
  rec.record(*a, OpType::kAllreduce, {}, std::chrono::seconds(1));
  EXPECT_EQ(rec.record(*b, OpType::kAllreduce, {}, std::chrono::seconds(1)).seq, 1u);

  const int32_t first = a->index();
  a.reset();
  b.reset();
  EXPECT_FALSE(rec.group_info(first).alive);
  // The same name after the group was destroyed (destroy, init again).
  auto again = std::make_shared<PrefixStore>("default_pg", root);
  auto d = rec.attach_group(again, nullptr, 0, 2, "gloo");
  EXPECT_EQ(rec.group_info(d->index()).name, "default_pg#2");
  EXPECT_EQ(rec.record(*d, OpType::kAllreduce, {}, std::chrono::seconds(1)).seq, 0u);
  // Without a store: keyed by the caller's pointer, named "pg".
  int key = 0;
  auto e = rec.attach_group(nullptr, &key, 0, 1, "gloo");
  EXPECT_EQ(rec.group_info(e->index()).name, "pg");
  rec.set_group_ranks(e->index(), {3});
  EXPECT_EQ(rec.group_info(e->index()).ranks, std::vector<int>({3}));
}

TEST(FlightRecorder, CallSiteComesFromTheInnermostScope) {
  FlightRecorder rec(10);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
  {
    TraceSite outer("ddp:allreduce", 2, 17);
    rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
    {
      TraceSite inner("a site name longer than the thirty-one bytes kept");
      rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
    }
    rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
  }
  auto entries = rec.snapshot().entries;
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_STREQ(entries[0].site, "");
  EXPECT_STREQ(entries[1].site, "ddp:allreduce");
  EXPECT_EQ(entries[1].site_bucket, 2);
  EXPECT_EQ(entries[1].site_step, 17);
  EXPECT_STREQ(entries[2].site, "a site name longer than the thi");
  EXPECT_EQ(entries[2].site_bucket, -1);
  EXPECT_STREQ(entries[3].site, "ddp:allreduce");
  EXPECT_EQ(TraceSite::current(), nullptr);
}

TEST(FlightRecorder, ASlotReusedWithoutACallSiteShowsNone) {
  FlightRecorder rec(1);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  {
    TraceSite site("ddp:allreduce", 3, 9);
    rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
  }
  rec.record(*g, OpType::kBroadcast, {}, std::chrono::seconds(1));  // the same slot
  auto entries = rec.snapshot().entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].op, OpType::kBroadcast);
  EXPECT_STREQ(entries[0].site, "");
  EXPECT_EQ(entries[0].site_bucket, -1);
  EXPECT_EQ(entries[0].site_step, -1);
}

TEST(FlightRecorder, AnOpStartedAtIssueStartsAtItsEnqueueTime) {
  FlightRecorder rec(4);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  TraceHandle h = rec.record(*g, OpType::kAllreduce, {}, std::chrono::seconds(1));
  h.started_at_issue();
  h.completed();
  const TraceEntry e = rec.snapshot().entries.at(0);
  EXPECT_EQ(e.state, TraceState::kCompleted);
  EXPECT_GT(e.enqueued_ns, 0);
  EXPECT_EQ(e.started_ns, e.enqueued_ns);
  EXPECT_GE(e.ended_ns, e.started_ns);
}

// A backend that claims its ops (Backend::claims_traces) gets them pending:
// recorded when it claims them, when its deferred claim records, or after
// the call when it claimed nothing; every way once, in issue order.
TEST(FlightRecorder, PendingOpsAreRecordedOnceWhicheverWayTheyAreClaimed) {
  FlightRecorder rec(8);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  auto completed = [] {
    return std::shared_ptr<Work>(std::make_shared<CompletedWork>(OpType::kAllreduce, TensorList{}));
  };
  const TraceOp args = args_of(7);
  const std::chrono::seconds timeout(2);
  TraceHandle claimed, deferred;
  uint64_t recorded_before_deferred_record = 0;
  launch_traced(*g, OpType::kAllreduce, args, timeout, true, [&] {
    claimed = CurrentTrace::claim();
    EXPECT_FALSE(CurrentTrace::claim()) << "claimed twice";
    return completed();
  });
  launch_traced(*g, OpType::kBroadcast, args, timeout, true, [&] {
    DeferredTrace later = CurrentTrace::claim_deferred();
    recorded_before_deferred_record = rec.snapshot().recorded;
    deferred = later.record();
    EXPECT_EQ(later.record().id, deferred.id) << "recorded twice";
    return completed();
  });
  launch_traced(*g, OpType::kBarrier, args, timeout, true, completed);
  claimed.completed();
  deferred.completed();
  const FlightRecorder::Snapshot s = rec.snapshot();
  EXPECT_EQ(recorded_before_deferred_record, 1u) << "recorded before the backend asked";
  ASSERT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.entries[0].op, OpType::kAllreduce);
  EXPECT_EQ(s.entries[1].op, OpType::kBroadcast);
  EXPECT_EQ(s.entries[2].op, OpType::kBarrier);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(s.entries[k].seq, k);
    EXPECT_EQ(s.entries[k].args.total_numel, 7);
    EXPECT_EQ(s.entries[k].timeout_ms, 2000);
    // The unclaimed one completes through its Work's future.
    EXPECT_EQ(s.entries[k].state, TraceState::kCompleted) << k;
  }
  EXPECT_EQ(claimed.id, s.entries[0].id);
  EXPECT_EQ(deferred.id, s.entries[1].id);
}

class RecordingListener : public FailureListener {
 public:
  std::vector<std::string> peer_states(const TraceGroupInfo& group,
                                       const Culprits& culprits) override {
    asked_group = group.name;
    asked_ranks = culprits.ranks;
    return {"rank 3: in allreduce #6 for 2.0 s"};
  }
  void on_failure(const TraceError& error) override { failures.push_back(error); }
  std::string asked_group;
  std::vector<int> asked_ranks;
  std::vector<TraceError> failures;
};

TEST(FlightRecorder, FailureNamesOpSequenceGroupAndSilentPeers) {
  FlightRecorder rec(10);
  RecordingListener listener;
  rec.set_failure_listener(&listener);
  auto g = rec.attach_group(prefixed("default_pg"), nullptr, 0, 4, "gloo");
  for (int i = 0; i < 7; ++i) rec.completed(rec.record(*g, OpType::kAllreduce, {}, {}));
  TraceHandle h = rec.record(*g, OpType::kAllreduce, args_of(2), std::chrono::seconds(30));
  rec.started(h);
  absl::Status cause = absl::DeadlineExceededError("allreduce of float32[2] on rank 0 of 4: ...");
  set_culprits(&cause, {CulpritReason::kSilent, {3}});
  absl::Status s = rec.failed(h, cause);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "allreduce #7 of group default_pg (rank 0 of 4) timed out after 30 s: no data from "
            "rank 3 (rank 3: in allreduce #6 for 2.0 s). allreduce of float32[2] on rank 0 of 4: "
            "...");
  ASSERT_TRUE(culprits_of(s).has_value());  // payload kept
  EXPECT_EQ(culprits_of(s)->ranks, std::vector<int>({3}));
  EXPECT_EQ(listener.asked_group, "default_pg");
  EXPECT_EQ(listener.asked_ranks, std::vector<int>({3}));
  ASSERT_EQ(listener.failures.size(), 1u);
  EXPECT_EQ(listener.failures[0].seq, 7u);
  EXPECT_EQ(listener.failures[0].message, std::string(s.message()));

  FlightRecorder::Snapshot snap = rec.snapshot();
  EXPECT_EQ(snap.entries.back().state, TraceState::kFailed);
  EXPECT_GT(snap.entries.back().ended_ns, 0);
  ASSERT_EQ(snap.errors.size(), 1u);
  EXPECT_EQ(snap.errors[0].peer_states.size(), 1u);
  EXPECT_NE(rec.describe_state(g->index()).find("allreduce #7 failed"), std::string::npos);
}

TEST(FlightRecorder, OtherFailuresKeepTheirText) {
  FlightRecorder rec(10);
  RecordingListener listener;
  rec.set_failure_listener(&listener);
  auto g = rec.attach_group(prefixed("group_1"), nullptr, 1, 2, "gloo");
  TraceHandle h = rec.record(*g, OpType::kBroadcast, {}, std::chrono::milliseconds(1500));
  absl::Status s = rec.failed(h, absl::UnavailableError("peer gone"));
  EXPECT_EQ(s.message(), "broadcast #0 of group group_1 (rank 1 of 2) failed. peer gone");
  absl::Status exited = absl::UnavailableError("x");
  set_culprits(&exited, {CulpritReason::kExited, {0, 1}});
  EXPECT_EQ(rec.failed(rec.record(*g, OpType::kBarrier, {}, {}), exited).message(),
            "barrier #1 of group group_1 (rank 1 of 2) failed: ranks 0, 1 exited or closed the "
            "connection (rank 3: in allreduce #6 for 2.0 s). x");
  // Cancellation and refused arguments pass through untouched, no dump.
  listener.failures.clear();
  absl::Status c = absl::CancelledError("destroyed");
  EXPECT_EQ(rec.failed(rec.record(*g, OpType::kBarrier, {}, {}), c), c);
  absl::Status bad = absl::InvalidArgumentError("no");
  EXPECT_EQ(rec.failed(rec.record(*g, OpType::kBarrier, {}, {}), bad), bad);
  EXPECT_TRUE(listener.failures.empty());
  EXPECT_EQ(rec.snapshot().entries[2].state, TraceState::kCancelled);
  EXPECT_EQ(rec.snapshot().entries[3].state, TraceState::kFailed);
}

TEST(FlightRecorder, ConcurrentRecordersAndSnapshots) {
  FlightRecorder rec(64);
  auto g = rec.attach_group(prefixed("g"), nullptr, 0, 2, "gloo");
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      FlightRecorder::Snapshot s = rec.snapshot();
      std::set<uint64_t> ids;
      for (const TraceEntry& e : s.entries) {
        EXPECT_TRUE(ids.insert(e.id).second);
        EXPECT_EQ(e.args.total_numel, static_cast<int64_t>(e.args.numel[0]));
      }
      rec.describe_state(g->index());
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        TraceHandle h = rec.record(*g, OpType::kAllreduce, args_of(t * 10000 + i), {});
        rec.started(h);
        rec.completed(h);
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  FlightRecorder::Snapshot s = rec.snapshot();
  EXPECT_EQ(s.recorded, 20000u);
  EXPECT_EQ(s.entries.size(), 64u);
  EXPECT_EQ(s.groups[0].next_seq, 20000u);
  for (const TraceEntry& e : s.entries) EXPECT_EQ(e.state, TraceState::kCompleted);
}

TEST(FlightRecorder, FormatTimeout) {
  EXPECT_EQ(format_timeout(std::chrono::seconds(30)), "30 s");
  EXPECT_EQ(format_timeout(std::chrono::milliseconds(1500)), "1500 ms");
  EXPECT_EQ(format_timeout(std::chrono::milliseconds(400)), "400 ms");
}

// Behind real ProcessGroups: the process-wide recorder sees every op of
// every rank's group (here all ranks are threads of one process).
TEST(FlightRecorderWithGloo, RecordsCollectivesAndPointToPointOps) {
  FlightRecorder& rec = FlightRecorder::get();
  auto groups = rank_threads::make_groups(2);
  const uint64_t before = rec.snapshot().recorded;
  rank_threads::on_every_rank(2, [&](int rank) {
    ProcessGroup& pg = *groups[rank];
    Tensor t = Tensor::zeros({3}, DType::kFloat32);
    ASSERT_TRUE(pg.allreduce({t})->wait().ok());
    BroadcastOptions b;
    b.root_rank = 1;
    ASSERT_TRUE(pg.broadcast({Tensor::zeros({5}, DType::kInt64)}, b)->wait().ok());
    SendRecvOptions o;
    o.tag = 3;
    if (rank == 0) {
      ASSERT_TRUE(pg.send({t}, 1, o)->wait().ok());
    } else {
      ASSERT_TRUE(pg.recv({t}, 0, o)->wait().ok());
    }
    ASSERT_TRUE(pg.barrier()->wait().ok());
  });
  FlightRecorder::Snapshot s = rec.snapshot();
  EXPECT_EQ(s.recorded - before, 8u);
  for (int rank = 0; rank < 2; ++rank) {
    const int32_t g = groups[rank]->trace_group().index();
    std::vector<TraceEntry> mine;
    for (const TraceEntry& e : s.entries)
      if (e.group == g) mine.push_back(e);
    ASSERT_EQ(mine.size(), 4u);
    EXPECT_EQ(mine[0].op, OpType::kAllreduce);
    EXPECT_EQ(mine[0].seq, 0u);
    EXPECT_EQ(mine[0].args.total_numel, 3);
    EXPECT_EQ(mine[0].args.reduce_op, static_cast<int8_t>(ReduceOp::SUM));
    EXPECT_EQ(mine[1].op, OpType::kBroadcast);
    EXPECT_EQ(mine[1].seq, 1u);
    EXPECT_EQ(mine[1].args.root, 1);
    EXPECT_EQ(mine[1].args.dtypes[0], DType::kInt64);
    EXPECT_EQ(mine[2].op, rank == 0 ? OpType::kSend : OpType::kRecv);
    EXPECT_TRUE(mine[2].p2p);
    EXPECT_EQ(mine[2].seq, 0u);
    EXPECT_EQ(mine[2].args.peer, 1 - rank);
    EXPECT_EQ(mine[2].args.tag, 3);
    EXPECT_EQ(mine[3].op, OpType::kBarrier);
    EXPECT_EQ(mine[3].seq, 2u);
    for (const TraceEntry& e : mine) {
      EXPECT_EQ(e.state, TraceState::kCompleted) << op_type_name(e.op);
      EXPECT_GT(e.ended_ns, 0);
      if (!e.p2p) {  // gloo marks the start of collectives
        EXPECT_GE(e.started_ns, e.enqueued_ns);
        EXPECT_GE(e.ended_ns, e.started_ns);
      }
    }
  }
}

TEST(FlightRecorderWithGloo, TimeoutNamesOpSequenceAndGroup) {
  auto groups = rank_threads::make_groups(2);
  rank_threads::on_every_rank(2, [&](int rank) {
    ProcessGroup& pg = *groups[rank];
    Tensor t = Tensor::zeros({8}, DType::kFloat32);
    ASSERT_TRUE(pg.allreduce({t})->wait().ok());
    if (rank == 1) return;  // never joins the second allreduce
    AllreduceOptions o;
    o.timeout = std::chrono::milliseconds(500);
    absl::Status s = pg.allreduce({t}, o)->wait();
    ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    const std::string name = FlightRecorder::get().group_info(pg.trace_group().index()).name;
    EXPECT_EQ(s.message().rfind(absl::StrCat("allreduce #1 of group ", name,
                                             " (rank 0 of 2) timed out after 500 ms"),
                                0),
              0u)
        << s;
  });
}

// Which peers a failure names (culprits.h), from the shared-memory path and
// from Gloo's TCP pairs.
std::vector<absl::Status> run_three_ranks_with_a_fault(
    const std::function<absl::Status(ProcessGroup&, int rank)>& body) {
  auto groups = rank_threads::make_groups(3);
  std::vector<absl::Status> out(3);
  rank_threads::on_every_rank(3, [&](int rank) {
    ProcessGroup& pg = *groups[rank];
    ASSERT_TRUE(pg.barrier()->wait().ok());
    out[rank] = body(pg, rank);
  });
  return out;
}

absl::Status allreduce_unless(ProcessGroup& pg, bool skip, int64_t numel = 8) {
  if (skip) return absl::OkStatus();
  AllreduceOptions o;
  o.timeout = std::chrono::milliseconds(700);
  return pg.allreduce({Tensor::zeros({numel}, DType::kFloat32)}, o)->wait();
}

TEST(FlightRecorderCulprits, SharedMemoryNamesTheRankThatNeverCame) {
  auto out = run_three_ranks_with_a_fault(
      [](ProcessGroup& pg, int rank) { return allreduce_unless(pg, rank == 2); });
  for (int rank : {0, 1}) {
    ASSERT_EQ(out[rank].code(), absl::StatusCode::kDeadlineExceeded) << out[rank];
    std::optional<Culprits> c = culprits_of(out[rank]);
    ASSERT_TRUE(c.has_value()) << out[rank];
    EXPECT_EQ(c->reason, CulpritReason::kSilent);
    EXPECT_EQ(c->ranks, std::vector<int>({2})) << out[rank];
    EXPECT_NE(out[rank].message().find("timed out after 700 ms: no data from rank 2"),
              std::string::npos)
        << out[rank];
  }
}

TEST(FlightRecorderCulprits, SharedMemoryCatchesAnotherCount) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto out = run_three_ranks_with_a_fault([](ProcessGroup& pg, int rank) {
    return allreduce_unless(pg, false, rank == 1 ? 9 : 8);
  });
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(600)) << "not caught before the timeout";
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_FALSE(out[rank].ok()) << rank;
    std::optional<Culprits> c = culprits_of(out[rank]);
    ASSERT_TRUE(c.has_value()) << out[rank];
    EXPECT_EQ(c->reason, CulpritReason::kMismatch) << out[rank];
    EXPECT_NE(out[rank].message().find(" runs another op. "), std::string::npos) << out[rank];
    if (rank == 1) continue;  // it names whichever peer it compared first
    EXPECT_EQ(c->ranks, std::vector<int>({1})) << out[rank];
    EXPECT_NE(out[rank].message().find("rank 1 runs another op on the shared-memory path: "
                                       "allreduce of 36 B"),
              std::string::npos)
        << out[rank];
  }
}

// A small allreduce travels in the ranks' inline boxes (shm/layout.h); a
// barrier posts as many steps and writes none.
TEST(FlightRecorderCulprits, SharedMemoryCatchesABarrierAgainstASmallAllreduce) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto out = run_three_ranks_with_a_fault([](ProcessGroup& pg, int rank) {
    if (rank != 1) return allreduce_unless(pg, false);
    BarrierOptions b;
    b.timeout = std::chrono::milliseconds(700);
    return pg.barrier(b)->wait();
  });
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(600)) << "not caught before the timeout";
  for (int rank : {0, 2}) {
    ASSERT_FALSE(out[rank].ok()) << rank;
    std::optional<Culprits> c = culprits_of(out[rank]);
    ASSERT_TRUE(c.has_value()) << out[rank];
    EXPECT_EQ(c->reason, CulpritReason::kMismatch) << out[rank];
    EXPECT_EQ(c->ranks, std::vector<int>({1})) << out[rank];
    EXPECT_NE(out[rank].message().find("rank 1 runs another op on the shared-memory path: "
                                       "barrier where this rank runs allreduce of 32 B"),
              std::string::npos)
        << out[rank];
  }
  ASSERT_FALSE(out[1].ok());
}

TEST(FlightRecorderCulprits, SharedMemoryCatchesAnotherRoot) {
  auto out = run_three_ranks_with_a_fault([](ProcessGroup& pg, int rank) {
    BroadcastOptions o;
    o.root_rank = rank == 2 ? 1 : 0;
    o.timeout = std::chrono::milliseconds(700);
    absl::Status s = pg.broadcast({Tensor::zeros({4}, DType::kFloat32)}, o)->wait();
    if (!s.ok()) return s;
    BarrierOptions b;
    b.timeout = std::chrono::milliseconds(700);
    return pg.barrier(b)->wait();
  });
  for (int rank = 0; rank < 3; ++rank) ASSERT_FALSE(out[rank].ok()) << rank;
  std::optional<Culprits> c = culprits_of(out[2]);
  ASSERT_TRUE(c.has_value()) << out[2];
  EXPECT_EQ(c->reason, CulpritReason::kMismatch) << out[2];
  EXPECT_NE(out[2].message().find("broadcast #1 of group"), std::string::npos) << out[2];
  EXPECT_NE(out[2].message().find("from root 0 where this rank runs broadcast of 16 B to/from root 1"),
            std::string::npos)
      << out[2];
}

TEST(FlightRecorderCulprits, TcpPairsNameTheSilentPeer) {
  setenv("DDPX_SHM", "0", 1);
  auto out = run_three_ranks_with_a_fault(
      [](ProcessGroup& pg, int rank) { return allreduce_unless(pg, rank == 2); });
  unsetenv("DDPX_SHM");
  std::set<int> named;
  for (int rank : {0, 1}) {
    ASSERT_EQ(out[rank].code(), absl::StatusCode::kDeadlineExceeded) << out[rank];
    std::optional<Culprits> c = culprits_of(out[rank]);
    ASSERT_TRUE(c.has_value()) << out[rank];
    // A rank waiting for data names the sender; one whose data waits names
    // the rank that never posted the receive.
    EXPECT_TRUE(c->reason == CulpritReason::kSilent || c->reason == CulpritReason::kNotReceiving)
        << out[rank];
    for (int r : c->ranks) {
      EXPECT_NE(r, rank) << out[rank];
      named.insert(r);
    }
  }
  EXPECT_EQ(named.count(2), 1u) << out[0] << "\n" << out[1];
}

// On TCP, ranks that call allreduce with different sizes wait on different
// Gloo slots (the size is in the tags) and time out naming a peer; without
// it the reader thread aborted the process on a message of another length.
TEST(FlightRecorderCulprits, TcpOtherCountTimesOutInsteadOfAborting) {
  setenv("DDPX_SHM", "0", 1);
  auto out = run_three_ranks_with_a_fault([](ProcessGroup& pg, int rank) {
    return allreduce_unless(pg, false, rank == 1 ? 9 : 8);
  });
  unsetenv("DDPX_SHM");
  // Small allreduces run Gloo's classic classes on the sync pairs, whose
  // slots carry no match key: there Gloo itself refuses the message of
  // another length (Unavailable, "enforce fail ... roffset + length"); on
  // the event-loop pairs the tags differ and the op times out naming the
  // peers. Either way every rank fails naming the op, and none aborts.
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(out[rank].code() == absl::StatusCode::kDeadlineExceeded ||
                out[rank].code() == absl::StatusCode::kUnavailable)
        << out[rank];
    if (out[rank].code() == absl::StatusCode::kDeadlineExceeded) {
      EXPECT_TRUE(culprits_of(out[rank]).has_value()) << out[rank];
    }
    EXPECT_NE(out[rank].message().find("allreduce #1 of group"), std::string::npos) << out[rank];
  }
}

}  // namespace
}  // namespace ddpx
