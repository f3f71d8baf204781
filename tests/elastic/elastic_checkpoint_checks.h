// What an elastic job of examples/train left in its --checkpoint_dir,
// checked after it ended (tests/elastic): every step folder complete and
// loadable, none partial, and the checkpoint `latest` names.
#ifndef DDPX_TESTS_ELASTIC_ELASTIC_CHECKPOINT_CHECKS_H_
#define DDPX_TESTS_ELASTIC_ELASTIC_CHECKPOINT_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddpx::elastic_test {

// The checkpoint `latest` names, as loaded.
struct LoadedCheckpoint {
  int64_t step = -1;              // the folder's step
  int64_t global_step = -1;       // the step its progress says
  std::string parameters_crc32c;  // "0x%08x", as examples/train prints a rank's
};

// Adds a gtest failure for each step folder of `dir` that is not a
// complete checkpoint (no MANIFEST, or a temporary file left in it) and
// for each complete one whose file does not match its MANIFEST or does not
// load into an MLP 784-<hidden>-10 with its optimizer. Returns the one
// `latest` names; nullopt (with a failure) when there is none.
std::optional<LoadedCheckpoint> check_elastic_checkpoints(const std::string& dir,
                                                          const std::vector<int64_t>& hidden);

}  // namespace ddpx::elastic_test

#endif  // DDPX_TESTS_ELASTIC_ELASTIC_CHECKPOINT_CHECKS_H_
