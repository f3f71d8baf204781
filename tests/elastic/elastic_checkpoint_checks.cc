#include "tests/elastic/elastic_checkpoint_checks.h"

#include <dirent.h>

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/checkpoint_manifest.h"
#include "examples/trainer/crc32c.h"
#include "examples/trainer/durable_file.h"
#include "examples/trainer/elastic_state.h"
#include "gtest/gtest.h"

namespace ddpx::elastic_test {
namespace {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

// Loads the complete checkpoint in `step_dir`; a failure names what is wrong.
std::optional<LoadedCheckpoint> load(const std::string& step_dir,
                                     const std::vector<int64_t>& hidden) {
  const std::string manifest_path = step_dir + "/" + trainer::kManifestFile;
  absl::StatusOr<std::string> text = trainer::read_whole_file(manifest_path);
  if (!text.ok()) {
    ADD_FAILURE() << text.status();
    return std::nullopt;
  }
  absl::StatusOr<trainer::Manifest> m = trainer::parse_manifest(manifest_path, *text);
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return std::nullopt;
  }
  if (m->files.size() != 1 || m->files[0].name != trainer::kElasticStateFile) {
    ADD_FAILURE() << manifest_path << " does not list " << trainer::kElasticStateFile
                  << " alone:\n" << *text;
    return std::nullopt;
  }
  const std::string path = step_dir + "/" + trainer::kElasticStateFile;
  absl::StatusOr<std::string> contents = trainer::read_whole_file(path);
  if (!contents.ok()) {
    ADD_FAILURE() << contents.status();
    return std::nullopt;
  }
  if (absl::Status s = trainer::check_against_manifest(path, *contents, m->files[0]); !s.ok()) {
    ADD_FAILURE() << s;
    return std::nullopt;
  }
  nn::Mlp model(nn::MlpConfig{784, hidden, 10, 0});
  nn::Sgd optimizer(model.parameter_list(), nn::SgdOptions{});
  trainer::MlpTrainState state(model, optimizer);
  trainer::ElasticPosition position;
  if (absl::Status s = trainer::load_elastic_state(*contents, &position, state); !s.ok()) {
    ADD_FAILURE() << path << ": " << s;
    return std::nullopt;
  }
  std::ostringstream params;
  if (absl::Status s = model.save(params); !s.ok()) {
    ADD_FAILURE() << s;
    return std::nullopt;
  }
  LoadedCheckpoint c;
  c.step = m->step;
  c.global_step = position.progress.global_step;
  c.parameters_crc32c = absl::StrFormat("0x%08x", trainer::crc32c(params.str()));
  EXPECT_EQ(c.global_step, c.step) << path;
  return c;
}

}  // namespace

std::optional<LoadedCheckpoint> check_elastic_checkpoints(const std::string& dir,
                                                          const std::vector<int64_t>& hidden) {
  for (const std::string& name : entries(dir)) {
    if (!absl::StartsWith(name, "step-")) continue;
    const std::string step_dir = dir + "/" + name;
    const std::vector<std::string> files = entries(step_dir);
    bool has_manifest = false;
    for (const std::string& f : files) {
      has_manifest |= f == trainer::kManifestFile;
      EXPECT_TRUE(f == trainer::kManifestFile || f == trainer::kElasticStateFile)
          << step_dir << " holds " << f << " (a partial write left behind)";
    }
    EXPECT_TRUE(has_manifest) << step_dir << " is incomplete (no MANIFEST) after the job";
    if (has_manifest) load(step_dir, hidden);
  }
  absl::StatusOr<std::string> latest = trainer::read_whole_file(dir + "/" + trainer::kLatestFile);
  if (!latest.ok()) {
    ADD_FAILURE() << dir << ": " << latest.status();
    return std::nullopt;
  }
  return load(dir + "/" + std::string(absl::StripTrailingAsciiWhitespace(*latest)), hidden);
}

}  // namespace ddpx::elastic_test
