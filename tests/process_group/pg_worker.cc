// One rank of a multi-process process-group test (run by init_test through
// rank_processes). Joins with init_process_group, runs a scenario, checks
// the results itself and exits 0 only if everything was right; what went
// wrong is printed for the test to show.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "process_group/rendezvous/init.h"
#include "process_group/round_robin.h"

ABSL_FLAG(std::string, init, "env://", "init_method");
ABSL_FLAG(std::string, backend, "gloo", "backend string");
ABSL_FLAG(int, rank, -1, "rank (-1: from the init method)");
ABSL_FLAG(int, world_size, -1, "world size (-1: from the init method)");
ABSL_FLAG(std::string, scenario, "collectives",
          "collectives | subgroups | dead_rank | last_op_then_leave");
ABSL_FLAG(std::string, last_op, "allreduce",
          "last_op_then_leave: allreduce | barrier | monitored_barrier");
ABSL_FLAG(int, timeout_ms, 20000, "group timeout");
ABSL_FLAG(bool, store_marker, false,
          "write marker/rank<r> into the default group's store, so the test "
          "can see which store the ranks used");

namespace ddpx {
namespace {

#define CHECK_OR_FAIL(cond, ...)                                    \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "rank check failed: %s: %s\n", #cond,         \
              absl::StrCat(__VA_ARGS__).c_str());                   \
      return 1;                                                     \
    }                                                               \
  } while (0)

// allreduce (SUM and MAX), broadcast from the last rank, allgather, barrier.
int collectives(ProcessGroup& pg) {
  const int r = pg.rank(), n = pg.size();
  Tensor t = Tensor::zeros({1000}, DType::kFloat32);
  t.fill_(r + 1);
  absl::Status s = pg.allreduce({t})->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  for (int64_t i = 0; i < t.numel(); i += 97) {
    CHECK_OR_FAIL(t.item(i) == n * (n + 1) / 2, "allreduce element ", i, " = ", t.item(i));
  }
  Tensor m = Tensor::from_vector<int64_t>({r, -r});
  AllreduceOptions max_opts;
  max_opts.op = ReduceOp::MAX;
  s = pg.allreduce({m}, max_opts)->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  CHECK_OR_FAIL(m.item(0) == n - 1 && m.item(1) == 0, "max = ", m.item(0), ",", m.item(1));

  Tensor b = Tensor::from_vector<double>({double(r), double(r) * 2});
  BroadcastOptions bopts;
  bopts.root_rank = n - 1;
  s = pg.broadcast({b}, bopts)->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  CHECK_OR_FAIL(b.item(0) == n - 1 && b.item(1) == 2 * (n - 1), "broadcast got ", b.item(0));

  Tensor in = Tensor::from_vector<int32_t>({r * 10, r * 10 + 1});
  std::vector<TensorList> out(1);
  for (int i = 0; i < n; ++i) out[0].push_back(Tensor::zeros({2}, DType::kInt32));
  s = pg.allgather(out, {in})->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  for (int i = 0; i < n; ++i) {
    CHECK_OR_FAIL(out[0][i].item(0) == i * 10 && out[0][i].item(1) == i * 10 + 1,
                  "allgather slot ", i, " = ", out[0][i].item(0));
  }
  s = pg.barrier()->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  return 0;
}

// Two overlapping subgroups, each reducing only among its members, plus a
// round-robin subgroup of everyone.
int subgroups(ProcessGroup& world) {
  const int r = world.rank(), n = world.size();
  CHECK_OR_FAIL(n >= 3, "subgroups needs 3+ ranks, got ", n);
  absl::StatusOr<std::shared_ptr<ProcessGroup>> evens = new_group({0, 2});
  CHECK_OR_FAIL(evens.ok(), evens.status().ToString());
  absl::StatusOr<std::shared_ptr<ProcessGroup>> tail = new_group({2, 1});
  CHECK_OR_FAIL(tail.ok(), tail.status().ToString());
  absl::StatusOr<std::shared_ptr<ProcessGroup>> all_rr =
      new_group({}, "round_robin:gloo*2");
  CHECK_OR_FAIL(all_rr.ok(), all_rr.status().ToString());

  CHECK_OR_FAIL((*evens != nullptr) == (r == 0 || r == 2), "evens membership of ", r);
  CHECK_OR_FAIL((*tail != nullptr) == (r == 1 || r == 2), "tail membership of ", r);
  if (*evens) {
    CHECK_OR_FAIL((*evens)->size() == 2 && (*evens)->rank() == r / 2,
                  "evens rank ", (*evens)->rank());
    Tensor t = Tensor::from_vector<float>({float(r + 1)});
    absl::Status s = (*evens)->allreduce({t})->wait();
    CHECK_OR_FAIL(s.ok(), s.ToString());
    CHECK_OR_FAIL(t.item(0) == 1 + 3, "evens sum ", t.item(0));
  }
  if (*tail) {
    // Sorted like torch: global rank 1 is group rank 0.
    CHECK_OR_FAIL((*tail)->rank() == r - 1, "tail rank ", (*tail)->rank());
    Tensor t = Tensor::from_vector<float>({float(r + 1)});
    absl::Status s = (*tail)->allreduce({t})->wait();
    CHECK_OR_FAIL(s.ok(), s.ToString());
    CHECK_OR_FAIL(t.item(0) == 2 + 3, "tail sum ", t.item(0));
  }
  CHECK_OR_FAIL((*all_rr)->backend_name() == "round_robin:gloo*2",
                (*all_rr)->backend_name());
  Tensor t = Tensor::from_vector<int64_t>({r, 1});
  for (int k = 0; k < 3; ++k) {
    Tensor u = t.clone();
    absl::Status s = (*all_rr)->allreduce({u})->wait();
    CHECK_OR_FAIL(s.ok(), s.ToString());
    CHECK_OR_FAIL(u.item(0) == n * (n - 1) / 2 && u.item(1) == n, "rr sum ", u.item(0));
  }
  // The world group still works after the subgroups were made.
  return collectives(world);
}

// The last rank leaves after one allreduce; the others' next allreduce must
// fail within the timeout with an error naming the op.
int dead_rank(ProcessGroup& pg, std::chrono::milliseconds timeout) {
  Tensor t = Tensor::zeros({256}, DType::kFloat32);
  absl::Status s = pg.allreduce({t})->wait();
  CHECK_OR_FAIL(s.ok(), s.ToString());
  if (pg.rank() == pg.size() - 1) {
    fflush(stdout);
    _exit(0);  // no goodbye: the peers see a closed connection or silence
  }
  auto start = std::chrono::steady_clock::now();
  s = pg.allreduce({t})->wait();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  CHECK_OR_FAIL(!s.ok(), "allreduce with a dead peer succeeded");
  printf("rank %d: allreduce failed after %lld ms: %s\n", pg.rank(),
         static_cast<long long>(took.count()), s.ToString().c_str());
  CHECK_OR_FAIL(absl::StrContains(s.message(), "allreduce"),
                "error does not name the op: ", s.ToString());
  CHECK_OR_FAIL(took <= timeout + std::chrono::milliseconds(3000),
                "took ", took.count(), " ms with timeout ", timeout.count());
  return 0;
}

// The job's last op, then destroy_process_group and exit at once, with no
// final barrier: each rank's last op must succeed although a peer that got
// through it first is already tearing down its group (and, on rank 0, the
// store server).
int last_op_then_leave(ProcessGroup& pg, const std::string& op) {
  absl::Status s;
  if (op == "allreduce") {
    Tensor t = Tensor::zeros({1 << 16}, DType::kFloat32);
    t.fill_(1);
    s = pg.allreduce({t})->wait();
    CHECK_OR_FAIL(!s.ok() || t.item(0) == pg.size(), "allreduce got ", t.item(0));
  } else if (op == "barrier") {
    s = pg.barrier()->wait();
  } else if (op == "monitored_barrier") {
    s = pg.monitored_barrier()->wait();
  } else {
    CHECK_OR_FAIL(false, "unknown --last_op=", op);
  }
  CHECK_OR_FAIL(s.ok(), "last op ", op, ": ", s.ToString());
  return 0;
}

int run() {
  InitOptions o;
  o.init_method = absl::GetFlag(FLAGS_init);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.rank = absl::GetFlag(FLAGS_rank);
  o.world_size = absl::GetFlag(FLAGS_world_size);
  o.timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  absl::StatusOr<std::shared_ptr<ProcessGroup>> pg = init_process_group(o);
  if (!pg.ok()) {
    fprintf(stderr, "init_process_group: %s\n", pg.status().ToString().c_str());
    return 2;
  }
  printf("rank %d of %d joined via %s with %s\n", (*pg)->rank(), (*pg)->size(),
         o.init_method.c_str(), (*pg)->backend_name().c_str());
  if (absl::GetFlag(FLAGS_store_marker)) {
    absl::Status s = (*pg)->store()->set(absl::StrCat("marker/rank", (*pg)->rank()),
                                         absl::StrCat("pid ", getpid()));
    if (!s.ok()) {
      fprintf(stderr, "store marker: %s\n", s.ToString().c_str());
      return 5;
    }
  }
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  int rc = 3;
  if (scenario == "collectives") rc = collectives(**pg);
  if (scenario == "subgroups") rc = subgroups(**pg);
  if (scenario == "dead_rank") rc = dead_rank(**pg, o.timeout);
  const bool leaves_at_once = scenario == "dead_rank" || scenario == "last_op_then_leave";
  if (scenario == "last_op_then_leave") rc = last_op_then_leave(**pg, absl::GetFlag(FLAGS_last_op));
  if (rc == 0 && !leaves_at_once) {
    // Nobody leaves (taking rank 0's store server along) while others still
    // need it.
    absl::Status s = (*pg)->barrier()->wait();
    if (!s.ok()) {
      fprintf(stderr, "final barrier: %s\n", s.ToString().c_str());
      rc = 4;
    }
  }
  if (rc == 0) printf("rank %d: OK\n", (*pg)->rank());
  fflush(stdout);
  destroy_process_group();
  return rc;
}

}  // namespace
}  // namespace ddpx

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddpx::run();
}
