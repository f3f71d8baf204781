// init_process_group in real processes (tcp://, file://, env:// from the
// torchrun and SLURM variables), subgroups, round-robin across processes, a
// rank dying mid-job; and init's errors, in process.
#include "process_group/rendezvous/init.h"

#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/hash_store.h"
#include "store/tcp_store.h"
#include "tests/process_group/rank_processes.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;
using testing_util::EnvVars;
using testing_util::RankRun;

const char kWorker[] = "tests/process_group/pg_worker";

std::vector<RankRun> run_workers(int nproc, std::vector<std::string> common_args,
                                 bool pass_rank,
                                 std::function<EnvVars(int)> env_for = nullptr,
                                 int deadline_s = 40) {
  auto args_for = [&](int rank) {
    std::vector<std::string> args = common_args;
    if (pass_rank) {
      args.push_back("--rank=" + std::to_string(rank));
      args.push_back("--world_size=" + std::to_string(nproc));
    }
    return args;
  };
  if (!env_for) env_for = [](int) { return EnvVars{}; };
  return testing_util::run_ranks(testing_util::runfile(kWorker), nproc, args_for,
                                 env_for, std::chrono::seconds(deadline_s));
}

void expect_all_ok(const std::vector<RankRun>& runs) {
  for (size_t r = 0; r < runs.size(); ++r) {
    EXPECT_TRUE(runs[r].ok()) << "rank " << r << " exit " << runs[r].exit_code
                              << " signal " << runs[r].signal << ":\n"
                              << runs[r].output;
    EXPECT_THAT(runs[r].output, HasSubstr("rank " + std::to_string(r) + ": OK"));
  }
}

TEST(InitProcesses, TcpInitMethod) {
  std::string url = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
  expect_all_ok(run_workers(3, {"--init=" + url}, true));
}

TEST(InitProcesses, FileInitMethod) {
  std::string url = "file://" + testing_util::scratch_path("rendezvous");
  expect_all_ok(run_workers(2, {"--init=" + url}, true));
}

TEST(InitProcesses, EnvInitMethodTorchrunVariables) {
  int port = testing_util::free_port();
  auto env = [port](int rank) {
    return EnvVars{{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"},
                   {"LOCAL_RANK", std::to_string(rank)}, {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(port)}};
  };
  expect_all_ok(run_workers(2, {"--init=env://"}, false, env));
}

TEST(InitProcesses, EnvInitMethodSlurmVariables) {
  int port = testing_util::free_port();
  auto env = [port](int rank) {
    return EnvVars{{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "2"},
                   {"SLURM_LOCALID", std::to_string(rank)},
                   {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(port)}};
  };
  expect_all_ok(run_workers(2, {"--init=env://"}, false, env));
}

TEST(InitProcesses, EnvInitMethodOpenMpiVariables) {
  int port = testing_util::free_port();
  auto env = [port](int rank) {
    return EnvVars{{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
  };
  expect_all_ok(run_workers(2, {"--init=env://"}, false, env));
}

// ---- torchrun's agent store: the test process plays the elastic agent ----

// The store torchrun's agent serves on MASTER_PORT before it starts ranks.
std::unique_ptr<TCPStore> start_agent_store() {
  TCPStoreOptions o;
  o.port = 0;
  o.is_master = true;
  o.wait_for_workers = false;
  o.timeout = std::chrono::seconds(20);
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create("127.0.0.1", o);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// What torchrun sets for each rank; agent_flag null leaves the variable out.
std::function<EnvVars(int)> torchrun_env(int world, int port, const char* agent_flag,
                                         int restart_count) {
  return [=](int rank) {
    EnvVars env = {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(world)},
                   {"LOCAL_RANK", std::to_string(rank)},
                   {"LOCAL_WORLD_SIZE", std::to_string(world)},
                   {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)},
                   {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)}};
    if (agent_flag != nullptr) env.push_back({"TORCHELASTIC_USE_AGENT_STORE", agent_flag});
    return env;
  };
}

TEST(InitProcesses, TorchrunAgentStoreIsJoinedByEveryRankAsAClient) {
  std::unique_ptr<TCPStore> agent = start_agent_store();
  ASSERT_NE(agent, nullptr);
  // Two attempts on one agent store, as after an elastic restart: the second
  // must not trip over the first one's keys.
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    // Rank 0 hosting its own store would fail: the agent holds the port.
    expect_all_ok(run_workers(2, {"--init=env://", "--store_marker"}, false,
                              torchrun_env(2, agent->port(), "True", attempt)));
    // The ranks' keys are in the agent's store, under torch's attempt prefix.
    for (int rank = 0; rank < 2; ++rank) {
      std::string key = "/worker/attempt_" + std::to_string(attempt) +
                        "/default_pg/marker/rank" + std::to_string(rank);
      absl::StatusOr<std::string> marker = agent->get_string(key);
      ASSERT_TRUE(marker.ok()) << key << ": " << marker.status();
      EXPECT_THAT(*marker, ::testing::StartsWith("pid "));
    }
  }
}

TEST(InitProcesses, WithoutTheAgentVariableRankZeroHostsTheStore) {
  // Any value but torch's "True" means no agent store: rank 0 hosts, and
  // the job works with nobody else serving the port.
  int port = testing_util::free_port();
  expect_all_ok(run_workers(2, {"--init=env://"}, false, torchrun_env(2, port, "False", 0)));

  // With the variable left out and an agent holding the port, rank 0 tries
  // to host there and says so.
  std::unique_ptr<TCPStore> agent = start_agent_store();
  ASSERT_NE(agent, nullptr);
  std::vector<RankRun> runs =
      run_workers(2, {"--init=env://", "--timeout_ms=2000"}, false,
                  torchrun_env(2, agent->port(), nullptr, 0));
  EXPECT_FALSE(runs[0].ok());
  EXPECT_THAT(runs[0].output, ::testing::AllOf(
                                  HasSubstr("as rank 0 of 2: store server: bind/listen on"),
                                  HasSubstr(std::to_string(agent->port()) +
                                            ": Address already in use")));
  EXPECT_FALSE(runs[1].ok()) << "rank 1 cannot finish without rank 0";
}

TEST(InitProcesses, SubgroupsAndRoundRobinAcrossProcesses) {
  std::string url = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
  expect_all_ok(run_workers(3, {"--init=" + url, "--scenario=subgroups"}, true));
}

TEST(InitProcesses, RoundRobinBackendString) {
  std::string url = "file://" + testing_util::scratch_path("rr");
  expect_all_ok(
      run_workers(2, {"--init=" + url, "--backend=round_robin:gloo*2"}, true));
}

TEST(InitProcesses, DeadRankFailsOthersWithinTimeoutNamingTheOp) {
  std::string url = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
  std::vector<RankRun> runs = run_workers(
      3, {"--init=" + url, "--scenario=dead_rank", "--timeout_ms=3000"}, true);
  for (size_t r = 0; r < runs.size(); ++r) {
    EXPECT_TRUE(runs[r].ok()) << "rank " << r << ":\n" << runs[r].output;
  }
  for (size_t r = 0; r + 1 < runs.size(); ++r) {
    EXPECT_THAT(runs[r].output, HasSubstr("allreduce failed after")) << runs[r].output;
  }
  std::cout << "rank 0 saw:\n" << runs[0].output;
}

// "Destroy right after the last op": every rank leaves as soon as its own
// last op is done (no final barrier), rank 0 taking the store server with
// it; no peer's last op may fail because of that.
TEST(InitProcesses, DestroyRightAfterTheLastOpLeavesPeersUnharmed) {
  for (const char* op : {"allreduce", "monitored_barrier"}) {
    SCOPED_TRACE(op);
    std::string url = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
    expect_all_ok(run_workers(
        3, {"--init=" + url, "--scenario=last_op_then_leave", std::string("--last_op=") + op},
        true));
  }
}

// ---- errors, in process ----

// The store rank 0 serves holds at most InitOptions::store_max_memory for
// its clients (1 GiB by default), so one request cannot take the machine.
TEST(InitStore, RankZeroServesItsStoreWithTheGivenMemoryLimit) {
  const Bytes value(2 << 20, 'x');  // 2 MiB
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
  o.store_max_memory = 1 << 20;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> limited = init_process_group(o);
  ASSERT_TRUE(limited.ok()) << limited.status();
  absl::Status refused = (*limited)->store()->set("big", value);
  EXPECT_THAT(refused.message(), HasSubstr("memory limit of 1048576 bytes")) << refused;
  limited->reset();
  destroy_process_group();

  InitOptions d;
  d.rank = 0;
  d.world_size = 1;
  d.init_method = "tcp://127.0.0.1:" + std::to_string(testing_util::free_port());
  EXPECT_EQ(d.store_max_memory, uint64_t{1} << 30);
  absl::StatusOr<std::shared_ptr<ProcessGroup>> defaults = init_process_group(d);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE((*defaults)->store()->set("big", value).ok());
  defaults->reset();
  destroy_process_group();
}

TEST(InitErrors, UnknownInitMethod) {
  InitOptions o;
  o.init_method = "udp://x";
  o.rank = 0;
  o.world_size = 1;
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("unknown init_method 'udp://x'"));
}

TEST(InitErrors, TcpNeedsRankAndWorldSize) {
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:1234";
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("init_method tcp:// needs rank and world_size"));
}

TEST(InitErrors, MalformedTcpUrl) {
  InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "tcp://localhost";
  EXPECT_THAT(init_process_group(o).status().message(), HasSubstr("expected tcp://host:port"));
  o.init_method = "tcp://localhost:http";
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("port 'http' is not a TCP port"));
}

TEST(InitErrors, EnvWithoutVariablesNamesThem) {
  InitOptions o;
  o.init_method = "env://";
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("no launch environment found"));
}

// Sets variables for one test and restores the environment after it.
class ScopedEnv {
 public:
  explicit ScopedEnv(EnvVars vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& kv : vars_) unsetenv(kv.first.c_str());
  }

 private:
  EnvVars vars_;
};

TEST(InitErrors, UnreachableTorchrunAgentStoreIsNamedAndRankZeroDoesNotHost) {
  // Rank 0 of 1 would host happily; under the agent store it must only
  // connect, and nobody listens on this port.
  const int port = testing_util::free_port();
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(port)},
                 {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                 {"TORCHELASTIC_RESTART_COUNT", "0"}});
  InitOptions o;
  o.init_method = "env://";
  o.timeout = std::chrono::milliseconds(500);
  absl::StatusOr<std::shared_ptr<ProcessGroup>> pg = init_process_group(o);
  if (pg.ok()) destroy_process_group();
  ASSERT_FALSE(pg.ok());
  EXPECT_THAT(pg.status().message(),
              HasSubstr("joining torchrun's agent store at 127.0.0.1:" + std::to_string(port) +
                        " as rank 0 of 1 (TORCHELASTIC_USE_AGENT_STORE=True)"));
}

TEST(InitErrors, TorchrunAgentStoreWithoutRestartCountIsNamed) {
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", "29999"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  InitOptions o;
  o.init_method = "env://";
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("TORCHELASTIC_RESTART_COUNT is not set"));
}

TEST(InitErrors, RankOutOfRange) {
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("rank 2 is out of range for world_size 2"));
}

TEST(InitErrors, NcclNotBuilt) {
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  o.backend = "nccl";
  absl::StatusOr<std::shared_ptr<ProcessGroup>> pg = init_process_group(o);
  if (pg.ok()) destroy_process_group();
  if (pg.ok() || !absl::StrContains(pg.status().message(), "not built")) {
    GTEST_SKIP() << "nccl is registered in this build (--config=cuda): "
                 << pg.status();
  }
  EXPECT_EQ(std::string(pg.status().message()),
            "nccl backend not built: build with --config=cuda");
}

TEST(InitErrors, UnknownBackendListsTheRegisteredOnes) {
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  o.backend = "mpi";
  EXPECT_THAT(init_process_group(o).status().message(),
              HasSubstr("unknown backend 'mpi' (registered: gloo"));
}

TEST(InitErrors, BadRoundRobinSpecs) {
  auto store = std::make_shared<HashStore>();
  auto msg = [&](const std::string& spec) {
    return std::string(
        create_backend(spec, store, 0, 1, std::chrono::seconds(5)).status().message());
  };
  EXPECT_THAT(msg("round_robin:gloo*0"), HasSubstr("needs a positive count after '*'"));
  EXPECT_THAT(msg("round_robin:gloo*x"), HasSubstr("needs a positive count after '*'"));
  EXPECT_THAT(msg("round_robin:"), HasSubstr("names an empty backend"));
  EXPECT_THAT(msg("round_robin:round_robin:gloo"), HasSubstr("cannot be nested"));
  EXPECT_THAT(msg("round_robin:gloo*100"), HasSubstr("more than 64"));
  EXPECT_THAT(msg("round_robin:gloo,foo"), HasSubstr("round_robin member 1: unknown backend 'foo'"));
}

TEST(InitSingleProcess, InitTwiceIsAnErrorAndDestroyAllowsAgain) {
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> pg = init_process_group(o);
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ(default_process_group(), *pg);
  EXPECT_THAT(init_process_group(o).status().message(), HasSubstr("already initialized"));
  destroy_process_group();
  EXPECT_EQ(default_process_group(), nullptr);
  o.store = std::make_shared<HashStore>();
  pg = init_process_group(o);
  ASSERT_TRUE(pg.ok()) << pg.status();
  destroy_process_group();
}

TEST(InitSingleProcess, NewGroupChecksItsArguments) {
  EXPECT_THAT(new_group({0}).status().message(), HasSubstr("call init_process_group first"));
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  ASSERT_TRUE(init_process_group(o).ok());
  EXPECT_THAT(new_group({0, 1}).status().message(),
              HasSubstr("rank 1 is out of range for the default group of size 1"));
  EXPECT_THAT(new_group({0, 0}).status().message(), HasSubstr("rank 0 is listed twice"));
  absl::StatusOr<std::shared_ptr<ProcessGroup>> g = new_group({0});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE(*g, nullptr);
  Tensor t = Tensor::from_vector<float>({5});
  EXPECT_TRUE((*g)->allreduce({t})->wait().ok());
  EXPECT_EQ(t.item(0), 5);
  destroy_process_group();
}

}  // namespace
}  // namespace ddpx
