// Replays the fuzzer's seed corpus through its entry point on every CI run,
// so the invariants it checks are tested without clang/libFuzzer too.
#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

TEST(FrameDecoderCorpus, EverySeedKeepsTheInvariants) {
  const std::string dir = "tests/fuzz/corpus/frame_decoder";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int files = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    std::string s = bytes.str();
    // Every prefix too: the same stream arriving cut short.
    for (size_t n = 0; n <= s.size(); ++n) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), n);
    }
    ++files;
  }
  closedir(d);
  EXPECT_GE(files, 15);
}

}  // namespace
