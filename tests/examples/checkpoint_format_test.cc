// The checkpoint's pieces without a process group: CRC32C, the file headers
// and their range checks, the manifest's strict parser, and the init flags.
#include <sstream>

#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/checkpoint_format.h"
#include "examples/trainer/checkpoint_manifest.h"
#include "examples/trainer/crc32c.h"
#include "examples/trainer/init_flags.h"
#include "gtest/gtest.h"

namespace ddpx::trainer {
namespace {

::testing::AssertionResult FailsNaming(const absl::Status& s, const std::string& a,
                                       const std::string& b) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted";
  const std::string m(s.message());
  if (m.find(a) == std::string::npos || m.find(b) == std::string::npos)
    return ::testing::AssertionFailure() << "'" << m << "' does not name " << a << " and " << b;
  if (m.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "not one line";
  return ::testing::AssertionSuccess();
}

TEST(Crc32cTest, MatchesTheStandardCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // RFC 3720's check value
  EXPECT_EQ(crc32c(""), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
  // Extending in pieces equals one pass.
  EXPECT_EQ(crc32c_extend(crc32c("12345"), "6789", 4), crc32c("123456789"));
}

// A hook stand-in whose state is a counter that doubles as its iteration.
class CountingSync : public GradientSync {
 public:
  std::string describe() const override { return "counting"; }
  absl::Status prepare() override { return absl::OkStatus(); }
  void mark_ready(size_t) override {}
  absl::Status finish() override { return absl::OkStatus(); }
  SyncStats last_stats() const override { return {}; }
  absl::Status save_state(std::ostream& out) const override {
    out << iteration << ";";
    return absl::OkStatus();
  }
  absl::Status load_state(std::istream& in) override {
    char end = 0;
    in >> iteration >> end;
    return end == ';' ? absl::OkStatus() : absl::DataLossError("counter unreadable");
  }
  int64_t hook_iteration() const override { return iteration; }
  int64_t iteration = 0;
};

struct Fixture {
  nn::Mlp model{{6, {4}, 3, 1}};
  nn::Sgd sgd{model.parameter_list(), {0.1f, 0.9f}};
  Progress progress;
  CheckpointExpectations expect;
  Fixture() {
    model.parameter_list()[0]->grad.fill_(1.0);
    sgd.step();
    progress = {/*epoch=*/2, /*step_in_epoch=*/7, /*global_step=*/27, /*steps_per_epoch=*/10,
                /*world_size=*/4, /*wall_seconds=*/12.5, /*epoch_loss_sum=*/9.25,
                /*epoch_loss_count=*/7, /*hook_start_step=*/0};
    expect = {27, 1, 4, 5, 10, "powersgd:rank=2"};
  }
};

TEST(CheckpointFormatTest, StateFileRoundTripsEveryField) {
  Fixture f;
  std::string bytes = encode_state_file(f.progress, f.model, f.sgd).value();
  nn::Mlp other({6, {4}, 3, 9});
  nn::Sgd other_sgd(other.parameter_list(), {0.1f, 0.9f});
  absl::StatusOr<Progress> p = decode_state_file("s", bytes, f.expect, other, other_sgd);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->epoch, 2);
  EXPECT_EQ(p->step_in_epoch, 7);
  EXPECT_EQ(p->global_step, 27);
  EXPECT_DOUBLE_EQ(p->wall_seconds, 12.5);
  EXPECT_DOUBLE_EQ(p->epoch_loss_sum, 9.25);
  EXPECT_EQ(p->epoch_loss_count, 7);
  EXPECT_EQ(other_sgd.steps_taken(), 1);
  EXPECT_EQ(other.parameter_list()[0]->value.to_float_vector(),
            f.model.parameter_list()[0]->value.to_float_vector());
}

// Each header field out of its range (or inconsistent with the others) is
// refused naming the field: the checksum protects against damage, these
// against a writer's bug or a checkpoint of another run.
TEST(CheckpointFormatTest, StateHeaderFieldsOutOfRangeAreRefusedByName) {
  struct Case {
    const char* field;
    std::function<void(Progress&)> change;
  };
  const std::vector<Case> cases = {
      {"epoch", [](Progress& p) { p.epoch = int64_t{4611686018427387904}; }},
      {"global_step", [](Progress& p) { p.global_step = 26; }},
      {"world_size", [](Progress& p) { p.world_size = 2; }},
      {"steps_per_epoch", [](Progress& p) { p.steps_per_epoch = 9; }},
      {"step_in_epoch", [](Progress& p) { p.step_in_epoch = 11; }},
      {"wall_seconds", [](Progress& p) { p.wall_seconds = std::nan(""); }},
      {"epoch_loss_sum", [](Progress& p) { p.epoch_loss_sum = -1; }},
      {"epoch_loss_count", [](Progress& p) { p.epoch_loss_count = 8; }},
  };
  for (const Case& c : cases) {
    Fixture f;
    c.change(f.progress);
    if (std::string(c.field) == "epoch" || std::string(c.field) == "step_in_epoch")
      f.progress.global_step = f.expect.step;  // only the field itself is off
    std::string bytes = encode_state_file(f.progress, f.model, f.sgd).value();
    EXPECT_TRUE(FailsNaming(decode_state_file("dir/state.bin", bytes, f.expect, f.model, f.sgd)
                                .status(),
                            "dir/state.bin", std::string("field ") + c.field))
        << c.field;
  }
}

TEST(CheckpointFormatTest, StateFileTruncatedAnywhereIsRefusedNotAborted) {
  Fixture f;
  const std::string bytes = encode_state_file(f.progress, f.model, f.sgd).value();
  for (size_t n : {size_t{0}, size_t{5}, size_t{20}, size_t{70}, bytes.size() / 2,
                   bytes.size() - 1}) {
    absl::Status s = decode_state_file("state.bin", bytes.substr(0, n), f.expect, f.model, f.sgd)
                         .status();
    EXPECT_TRUE(FailsNaming(s, "state.bin", "field")) << n;
  }
}

TEST(CheckpointFormatTest, HookFileChecksRankStepHookAndIteration) {
  Fixture f;
  CountingSync sync;
  sync.iteration = 27;
  const std::string bytes = encode_hook_file(f.progress, 1, "powersgd:rank=2", sync).value();
  CountingSync loaded;
  absl::StatusOr<HookFileHeader> h = decode_hook_file("h", bytes, f.expect, loaded);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(loaded.iteration, 27);

  CheckpointExpectations other_rank = f.expect;
  other_rank.rank = 2;
  EXPECT_TRUE(FailsNaming(decode_hook_file("h", bytes, other_rank, loaded).status(), "h",
                          "field rank = 1"));
  CheckpointExpectations other_step = f.expect;
  other_step.step = 28;
  EXPECT_TRUE(FailsNaming(decode_hook_file("h", bytes, other_step, loaded).status(), "h",
                          "field step = 27"));
  CheckpointExpectations other_hook = f.expect;
  other_hook.hook = "allreduce";
  EXPECT_TRUE(FailsNaming(decode_hook_file("h", bytes, other_hook, loaded).status(),
                          "field hook = 'powersgd:rank=2'", "--reset_hook_state"));
  // A hook state from another step than the header says (the mixed state of
  // a crash between two files).
  sync.iteration = 26;
  const std::string stale = encode_hook_file(f.progress, 1, "powersgd:rank=2", sync).value();
  EXPECT_TRUE(FailsNaming(decode_hook_file("h", stale, f.expect, loaded).status(), "h",
                          "field hook_iteration = 26"));
}

TEST(ManifestTest, RoundTripsAndRefusesAnyChangedByte) {
  Manifest m{45, 2, {{"state.bin", 1234, 0xdeadbeef}, {"hook_rank0.bin", 10, 1}}};
  const std::string text = encode_manifest(m);
  absl::StatusOr<Manifest> back = parse_manifest("M", text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 45);
  EXPECT_EQ(back->world_size, 2);
  ASSERT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->files[0].crc32c, 0xdeadbeefu);
  EXPECT_EQ(back->files[1].name, "hook_rank0.bin");
  for (size_t i = 0; i < text.size(); ++i) {
    std::string flipped = text;
    flipped[i] ^= 0x04;
    EXPECT_TRUE(FailsNaming(parse_manifest("dir/MANIFEST", flipped).status(), "dir/MANIFEST",
                            "field")) << "byte " << i;
  }
  EXPECT_TRUE(FailsNaming(parse_manifest("M", text.substr(0, text.size() - 3)).status(), "M",
                          "manifest_crc32c"));
}

TEST(ManifestTest, FileCheckNamesSizeAndChecksum) {
  ManifestEntry e{"state.bin", 4, crc32c("abcd")};
  EXPECT_TRUE(check_against_manifest("p", "abcd", e).ok());
  EXPECT_TRUE(FailsNaming(check_against_manifest("p", "abc", e), "p", "field size = 3"));
  EXPECT_TRUE(FailsNaming(check_against_manifest("p", "abce", e), "p", "field crc32c"));
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(InitFlagsTest, TcpAndFileTakeFlagsThenRankAndWorldSize) {
  InitOptions o;
  ASSERT_TRUE(resolve_init_flags({"tcp://h:1", 1, 4, "j"}, env_of({}), &o).ok());
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.job_id, "j");
  ASSERT_TRUE(resolve_init_flags({"file:///tmp/x", -1, -1, ""},
                                 env_of({{"RANK", "2"}, {"WORLD_SIZE", "3"}}), &o)
                  .ok());
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.world_size, 3);
  // The flag wins over the variable.
  ASSERT_TRUE(resolve_init_flags({"tcp://h:1", 0, -1, ""},
                                 env_of({{"RANK", "2"}, {"WORLD_SIZE", "3"}}), &o)
                  .ok());
  EXPECT_EQ(o.rank, 0);
}

TEST(InitFlagsTest, MissingOrBadRankIsAClearError) {
  InitOptions o;
  EXPECT_TRUE(FailsNaming(resolve_init_flags({"tcp://h:1", -1, -1, ""}, env_of({}), &o),
                          "--rank and --world_size", "missing: rank and world size"));
  EXPECT_TRUE(FailsNaming(
      resolve_init_flags({"file:///x", -1, 2, ""}, env_of({{"RANK", "one"}}), &o), "RANK='one'",
      "--rank"));
  EXPECT_TRUE(FailsNaming(resolve_init_flags({"tcp://h:1", 2, 2, ""}, env_of({}), &o), "rank 2",
                          "world size 2"));
  EXPECT_TRUE(FailsNaming(resolve_init_flags({"env://", 1, -1, ""}, env_of({}), &o), "--rank",
                          "--world_size"));
}

TEST(InitFlagsTest, JobIdComesFromSlurmThenTorchelastic) {
  EXPECT_EQ(job_id_from_env(env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "2"},
                                    {"TORCHELASTIC_RUN_ID", "x"}})),
            "slurm-7.2");
  EXPECT_EQ(job_id_from_env(env_of({{"TORCHELASTIC_RUN_ID", "x"}})), "torchelastic-x");
  EXPECT_EQ(job_id_from_env(env_of({})), "");
  EXPECT_NE(new_local_job_id(), "");
}

}  // namespace
}  // namespace ddpx::trainer
