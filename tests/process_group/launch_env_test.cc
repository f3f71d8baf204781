// read_launch_env for each launcher family: torchrun, SLURM, Open MPI.
#include "process_group/rendezvous/launch_env.h"

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;

class FakeEnv {
 public:
  explicit FakeEnv(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  FakeEnv(std::initializer_list<std::pair<const std::string, std::string>> vars)
      : vars_(vars) {}
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }
  absl::StatusOr<LaunchEnv> read() const { return read_launch_env_from(lookup()); }

 private:
  std::map<std::string, std::string> vars_;
};

TEST(TorchrunEnv, ReadsEveryVariable) {
  FakeEnv env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
               {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.1.2.3"},
               {"MASTER_PORT", "29501"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "10.1.2.3");
  EXPECT_EQ(e->master_port, 29501);
}

TEST(TorchrunAgentStoreEnv, OnlyTorchsExactTrueTurnsItOn) {
  auto in_use = [](FakeEnv env) {
    absl::StatusOr<TorchrunAgentStore> a = read_torchrun_agent_store(env.lookup());
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() && a->in_use;
  };
  EXPECT_FALSE(in_use(FakeEnv({})));
  EXPECT_FALSE(in_use(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "False"}})));
  EXPECT_FALSE(in_use(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "true"}})));
  EXPECT_FALSE(in_use(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "1"}})));
  EXPECT_TRUE(in_use(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                              {"TORCHELASTIC_RESTART_COUNT", "0"}})));
}

TEST(TorchrunAgentStoreEnv, KeysLiveUnderTheRestartAttempt) {
  FakeEnv env({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "3"}});
  absl::StatusOr<TorchrunAgentStore> a = read_torchrun_agent_store(env.lookup());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->restart_count, 3);
  EXPECT_EQ(a->key_prefix(), "/worker/attempt_3");
}

TEST(TorchrunAgentStoreEnv, RestartCountIsRequiredAndChecked) {
  EXPECT_THAT(read_torchrun_agent_store(
                  FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "True"}}).lookup())
                  .status()
                  .message(),
              HasSubstr("TORCHELASTIC_RESTART_COUNT is not set (torchrun with "
                        "TORCHELASTIC_USE_AGENT_STORE=True"));
  EXPECT_THAT(read_torchrun_agent_store(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                 {"TORCHELASTIC_RESTART_COUNT", "x"}})
                                            .lookup())
                  .status()
                  .message(),
              HasSubstr("TORCHELASTIC_RESTART_COUNT='x' is not an integer"));
  EXPECT_THAT(read_torchrun_agent_store(FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                 {"TORCHELASTIC_RESTART_COUNT", "-1"}})
                                            .lookup())
                  .status()
                  .message(),
              HasSubstr("TORCHELASTIC_RESTART_COUNT=-1 must be a count"));
}

TEST(TorchrunEnv, LocalRankIsOptional) {
  FakeEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"},
               {"MASTER_PORT", "1234"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->local_rank, -1);
}

TEST(TorchrunEnv, MissingVariablesAreNamed) {
  EXPECT_THAT(FakeEnv({{"RANK", "0"}}).read().status().message(),
              HasSubstr("WORLD_SIZE is not set"));
  EXPECT_THAT(FakeEnv({{"WORLD_SIZE", "2"}}).read().status().message(),
              HasSubstr("RANK is not set"));
  EXPECT_THAT(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})
                  .read()
                  .status()
                  .message(),
              HasSubstr("MASTER_ADDR is not set"));
  EXPECT_THAT(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})
                  .read()
                  .status()
                  .message(),
              HasSubstr("MASTER_PORT is not set"));
}

TEST(TorchrunEnv, MalformedValuesAreNamed) {
  std::map<std::string, std::string> base = {{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                             {"MASTER_ADDR", "h"},
                                             {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto m = base;
    m[k] = v;
    return FakeEnv(m).read().status();
  };
  EXPECT_THAT(with("RANK", "two").message(), HasSubstr("RANK='two' is not an integer"));
  EXPECT_THAT(with("RANK", "2").message(),
              HasSubstr("RANK=2 is out of range for WORLD_SIZE=2"));
  EXPECT_THAT(with("WORLD_SIZE", "0").message(), HasSubstr("WORLD_SIZE=0 must be at least 1"));
  EXPECT_THAT(with("MASTER_PORT", "70000").message(),
              HasSubstr("MASTER_PORT=70000 is not a TCP port"));
}

TEST(SlurmEnv, ReadsRankSizeLocalAndLaunchNode) {
  FakeEnv env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
               {"SLURM_NTASKS_PER_NODE", "4(x2)"},
               {"SLURM_LAUNCH_NODE_IPADDR", "192.168.0.7"},
               {"SLURM_JOB_NODELIST", "gpu[01-02]"}, {"SLURM_JOB_ID", "123456"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->master_addr, "192.168.0.7");
  EXPECT_EQ(e->master_port, slurm_default_port(123456));
  EXPECT_EQ(e->master_port, 15000 + 123456 % 15000);
}

TEST(SlurmEnv, MasterFromNodeListWhenNoLaunchAddress) {
  FakeEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
               {"SLURM_NODELIST", "node[007-009,12],login1"},
               {"SLURM_JOB_ID", "77"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->master_addr, "node007");
  EXPECT_EQ(e->master_port, 15077);
}

TEST(SlurmEnv, ExplicitMasterWins) {
  FakeEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
               {"SLURM_LAUNCH_NODE_IPADDR", "1.1.1.1"}, {"MASTER_ADDR", "head"},
               {"MASTER_PORT", "4000"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->master_addr, "head");
  EXPECT_EQ(e->master_port, 4000);
}

TEST(SlurmEnv, MissingPiecesAreNamed) {
  EXPECT_THAT(FakeEnv({{"SLURM_PROCID", "0"}}).read().status().message(),
              HasSubstr("SLURM_NTASKS is not set"));
  EXPECT_THAT(FakeEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                       {"SLURM_JOB_ID", "1"}})
                  .read()
                  .status()
                  .message(),
              HasSubstr("no master address"));
  EXPECT_THAT(FakeEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                       {"SLURM_NODELIST", "a"}})
                  .read()
                  .status()
                  .message(),
              HasSubstr("SLURM_JOB_ID is not set"));
}

TEST(SlurmNodeList, FirstHost) {
  EXPECT_EQ(*first_slurm_host("node1"), "node1");
  EXPECT_EQ(*first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(*first_slurm_host("n[3-5]"), "n3");
  EXPECT_EQ(*first_slurm_host("n[0010,12]-ib"), "n0010-ib");
  EXPECT_EQ(*first_slurm_host("rack[2-3],n[1-2]"), "rack2");
  EXPECT_FALSE(first_slurm_host("").ok());
  EXPECT_THAT(first_slurm_host("n[1-").status().message(), HasSubstr("malformed"));
}

TEST(OmpiEnv, ReadsRankSizeLocal) {
  FakeEnv env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"MASTER_ADDR", "m"}, {"MASTER_PORT", "5000"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "m");
}

TEST(OmpiEnv, MissingVariablesAreNamed) {
  EXPECT_THAT(FakeEnv({{"OMPI_COMM_WORLD_RANK", "0"}}).read().status().message(),
              HasSubstr("OMPI_COMM_WORLD_SIZE is not set"));
  EXPECT_THAT(FakeEnv({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}})
                  .read()
                  .status()
                  .message(),
              HasSubstr("MASTER_ADDR is not set"));
}

TEST(LaunchEnv, TorchrunTakesPrecedenceOverSlurm) {
  FakeEnv env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"},
               {"MASTER_PORT", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "9"}});
  absl::StatusOr<LaunchEnv> e = env.read();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 2);
}

TEST(LaunchEnv, NothingSetSaysWhatToSet) {
  EXPECT_THAT(FakeEnv({}).read().status().message(),
              HasSubstr("no launch environment found"));
}

// The process-environment entry point reads the real environment.
TEST(LaunchEnv, ReadsTheProcessEnvironment) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "3", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29999", 1);
  absl::StatusOr<LaunchEnv> e = read_launch_env();
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 3);
  EXPECT_EQ(e->master_port, 29999);
}

}  // namespace
}  // namespace ddpx
