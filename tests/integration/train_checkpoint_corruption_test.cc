// Damaged checkpoints are refused before anything is trusted: one line
// naming the file and the field, a non-zero exit, never an abort. Each case
// damages a copy of a real 2-rank PowerSGD checkpoint and resumes from it.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "examples/trainer/checkpoint_manifest.h"
#include "examples/trainer/crc32c.h"
#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// 5 steps per epoch; checkpoints at 2, 4, 5 and 6; steps 5 and 6 are kept.
const std::string kFlags =
    " --nproc=2 --hidden=16 --batch_size=8 --train_limit=80 --epochs=2 --checkpoint_every=2"
    " --log_every=1000 --timeout_s=60 --hook=powersgd:rank=1,start_iter=2";

void write_file(const std::string& path, const std::string& contents) {
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  fwrite(contents.data(), 1, contents.size(), f);
  fclose(f);
}

class TrainCheckpointCorruptionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pristine_ = new std::string(fresh_dir("pristine"));
    RunResult r = run_command(std::string(kTrainBinary) + kFlags + " --max_steps=6 --checkpoint_dir=" +
                              *pristine_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // A copy of the pristine checkpoints, damaged by `damage(step_dir)` in
  // the folder of step 6 (the one `latest` names); then a resume.
  // `env` (VAR=value ...) goes before the command.
  RunResult resume_after(const std::string& name,
                         const std::function<void(const std::string&)>& damage,
                         const std::string& extra_flags = "", const std::string& env = "") {
    const std::string dir = fresh_dir("corrupt_" + name);
    EXPECT_EQ(run_command("cp -a " + *pristine_ + "/. " + dir).exit_code, 0);
    damage(dir + "/step-00000006");
    return run_command(env + " " + kTrainBinary + kFlags + " --max_steps=8 --checkpoint_dir=" +
                       dir + extra_flags);
  }

  // Refused: exit status 1 (not an abort's 134), a line naming the file of
  // step 6 and the field, and no training.
  static void expect_refused(const RunResult& r, const std::string& file,
                             const std::string& field) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string where = "step-00000006/" + file;
    bool found = false;
    size_t start = 0;
    while (start < r.output.size()) {
      size_t end = r.output.find('\n', start);
      if (end == std::string::npos) end = r.output.size();
      const std::string line = r.output.substr(start, end - start);
      if (line.find(where) != std::string::npos && line.find(field) != std::string::npos)
        found = true;
      start = end + 1;
    }
    EXPECT_TRUE(found) << "no line names " << where << " and '" << field << "':\n" << r.output;
    EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;
  }

  static std::string* pristine_;
};
std::string* TrainCheckpointCorruptionTest::pristine_ = nullptr;

void flip_bit(const std::string& path, long offset_from_start_or_end) {
  std::string s = read_file(path);
  ASSERT_FALSE(s.empty()) << path;
  const size_t at = offset_from_start_or_end >= 0 ? offset_from_start_or_end
                                                  : s.size() + offset_from_start_or_end;
  ASSERT_LT(at, s.size());
  s[at] ^= 0x10;
  write_file(path, s);
}

std::string test_tmpdir() {
  const char* tmp = getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

void truncate_to_half(const std::string& path) {
  std::string s = read_file(path);
  write_file(path, s.substr(0, s.size() / 2));
}

TEST_F(TrainCheckpointCorruptionTest, UndamagedCheckpointResumes) {
  RunResult r = resume_after("none", [](const std::string&) {});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

TEST_F(TrainCheckpointCorruptionTest, TruncatedFilesAreRefused) {
  for (const char* f : {"state.bin", "hook_rank0.bin", "hook_rank1.bin"}) {
    SCOPED_TRACE(f);
    expect_refused(resume_after(std::string("trunc_") + f,
                                [&](const std::string& d) { truncate_to_half(d + "/" + f); }),
                   f, "field size");
  }
  expect_refused(resume_after("trunc_manifest",
                              [](const std::string& d) { truncate_to_half(d + "/MANIFEST"); }),
                 "MANIFEST", "field manifest_crc32c");
}

// Regions: state.bin's header (the epoch and wall-time fields of issue 19's
// points 3 and 4), its model weights and its optimizer state; each hook
// file's header and its PowerSGD state; the manifest's step line.
TEST_F(TrainCheckpointCorruptionTest, AFlippedBitInEachRegionOfEachFileIsRefused) {
  struct Case {
    const char* file;
    long offset;
    const char* field;
  };
  const Case cases[] = {
      {"state.bin", 20, "field crc32c"},          // header: epoch
      {"state.bin", 54, "field crc32c"},          // header: wall_seconds
      {"state.bin", 400, "field crc32c"},         // model: fc0.weight
      {"state.bin", -20, "field crc32c"},         // optimizer: last momentum
      {"hook_rank0.bin", 14, "field crc32c"},     // header: step
      {"hook_rank0.bin", -200, "field crc32c"},   // PowerSGD state
      {"hook_rank1.bin", 30, "field crc32c"},     // header: hook spec
      {"hook_rank1.bin", -9, "field crc32c"},     // PowerSGD state
      {"MANIFEST", 29, "field manifest_crc32c"},  // "step 6"
      {"MANIFEST", -5, "field manifest_crc32c"},  // its own checksum
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.file) + " at " + std::to_string(c.offset));
    expect_refused(resume_after(std::string("flip_") + c.file + std::to_string(c.offset),
                                [&](const std::string& d) { flip_bit(d + "/" + c.file, c.offset); }),
                   c.file, c.field);
  }
}

TEST_F(TrainCheckpointCorruptionTest, MissingHookFileIsRefused) {
  expect_refused(resume_after("missing_hook",
                              [](const std::string& d) {
                                ASSERT_EQ(remove((d + "/hook_rank1.bin").c_str()), 0);
                              }),
                 "hook_rank1.bin", "field file: missing");
}

TEST_F(TrainCheckpointCorruptionTest, ManifestOfAnotherStepIsRefused) {
  expect_refused(resume_after("other_manifest",
                              [](const std::string& d) {
                                const std::string m = read_file(d + "/../step-00000005/MANIFEST");
                                write_file(d + "/MANIFEST", m);
                              }),
                 "MANIFEST", "field step = 5");
}

// Issue 19 point 1: a hook file of another step next to state.bin (the
// mixed state a crash between files used to leave) is never loaded.
TEST_F(TrainCheckpointCorruptionTest, HookFileOfAnotherStepIsRefused) {
  expect_refused(resume_after("mixed_hook",
                              [](const std::string& d) {
                                write_file(d + "/hook_rank1.bin",
                                           read_file(d + "/../step-00000005/hook_rank1.bin"));
                              }),
                 "hook_rank1.bin", "field crc32c");
}

// Issue 19 point 4: a header field out of range is refused even when the
// manifest vouches for the file (a writer's bug, or a forged checkpoint):
// here the epoch becomes 2^62 and the manifest is rewritten to match.
TEST_F(TrainCheckpointCorruptionTest, OutOfRangeEpochWithValidChecksumsIsRefused) {
  RunResult r = resume_after("forged_epoch", [](const std::string& d) {
    std::string state = read_file(d + "/state.bin");
    const uint64_t epoch = uint64_t{1} << 62;
    for (int i = 0; i < 8; ++i) state[20 + i] = static_cast<char>(epoch >> (8 * i));  // epoch
    write_file(d + "/state.bin", state);
    trainer::Manifest m = trainer::parse_manifest("M", read_file(d + "/MANIFEST")).value();
    m.files[0].size = state.size();
    m.files[0].crc32c = trainer::crc32c(state);
    write_file(d + "/MANIFEST", trainer::encode_manifest(m));
  });
  expect_refused(r, "state.bin", "field epoch = 4611686018427387904 is out of range [0, 2]");
}

TEST_F(TrainCheckpointCorruptionTest, AutoFallsBackToThePreviousCompleteCheckpointWithAWarning) {
  RunResult r = resume_after(
      "auto", [](const std::string& d) { flip_bit(d + "/state.bin", 400); }, " --resume=auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: resume"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("state.bin: field crc32c"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step-00000006 refused by rank 0, 1; falling back"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos);
  EXPECT_NE(r.output.find("step-00000005: epoch 2, step 5"), std::string::npos) << r.output;
}

// Issue 33 point 11: an I/O error is no proof of damage. Reading step 6's
// state.bin fails with EIO: --resume=auto stops naming the file and the
// error instead of falling back, and leaves every checkpoint as it was;
// once the storage reads again the next run resumes from step 6.
TEST_F(TrainCheckpointCorruptionTest, AutoStopsOnAnIoErrorWithoutFallingBack) {
  const std::string dir = test_tmpdir() + "/corrupt_eio";
  RunResult r = resume_after(
      "eio", [](const std::string&) {}, " --resume=auto",
      "DDPX_CHECKPOINT_READ_EIO=step-00000006/state.bin");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: resume (rank 1): read(" + dir +
                          "/step-00000006/state.bin): Input/output error"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resume from " + dir + "/step-00000006 stopped: rank 0, 1 could not "
                          "load it (its error above names the file), which is not proof that it "
                          "is damaged, so no fallback to an older checkpoint"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("falling back"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir + "/latest"), "step-00000006\n");
  EXPECT_EQ(run_command("ls " + dir).output,
            "LOCK\nlatest\nstep-00000005\nstep-00000006\n");
  RunResult again = run_command(std::string(kTrainBinary) + kFlags +
                                " --max_steps=8 --resume=auto --checkpoint_dir=" + dir);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed from " + dir + "/step-00000006: epoch 2, step 6"),
            std::string::npos)
      << again.output;
}

// Issue 33 point 11: after falling back from the damaged step 6 to step 5,
// the run saves steps 6 and 8 of its own; the damaged step 6 is kept, set
// aside byte for byte, never pruned or overwritten.
TEST_F(TrainCheckpointCorruptionTest, AutoFallbackKeepsTheNewerCheckpoint) {
  const std::string dir = test_tmpdir() + "/corrupt_keep_newer";
  std::string damaged_state;
  RunResult r = resume_after(
      "keep_newer",
      [&](const std::string& d) {
        flip_bit(d + "/state.bin", 400);
        damaged_state = read_file(d + "/state.bin");
      },
      " --resume=auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step-00000005: epoch 2, step 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(dir + "/step-00000006 is newer than step-00000005, which this run "
                          "resumed from: kept as " + dir + "/step-00000006.not-resumed"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(run_command("ls " + dir).output,
            "LOCK\nlatest\nstep-00000006\nstep-00000006.not-resumed\nstep-00000008\n");
  EXPECT_TRUE(read_file(dir + "/step-00000006.not-resumed/state.bin") == damaged_state);
  EXPECT_FALSE(read_file(dir + "/step-00000006.not-resumed/MANIFEST").empty());
  EXPECT_EQ(read_file(dir + "/latest"), "step-00000008\n");
}

TEST_F(TrainCheckpointCorruptionTest, DamagedLatestPointerIsRefusedNaming) {
  RunResult r = resume_after("latest", [](const std::string& d) {
    write_file(d + "/../latest", "step-0000000x\n");
  });
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("latest: field step: 'step-0000000x\\n' is not a checkpoint folder"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ddpx::integration_test
