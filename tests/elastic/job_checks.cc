#include "tests/elastic/job_checks.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>

#include "gtest/gtest.h"
#include "tests/elastic/elastic_job.h"

namespace ddpx::elastic_test {
namespace {

bool held_by_a_live_process(const std::string& name) {
  const int fd = shm_open(("/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) return true;  // gone meanwhile: unlinked by its live owner
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0;
  if (!held) flock(fd, LOCK_UN);
  close(fd);
  return held;
}

}  // namespace

KillAt::KillAt(const std::string& name, const std::string& spec) {
  const std::string markers = std::string(getenv("TEST_TMPDIR")) + "/kill_markers_" + name;
  EXPECT_EQ(mkdir(markers.c_str(), 0755), 0) << markers;
  setenv("DDPX_KILL_AT", spec.c_str(), 1);
  setenv("DDPX_KILL_MARKERS", markers.c_str(), 1);
}

KillAt::~KillAt() {
  unsetenv("DDPX_KILL_AT");
  unsetenv("DDPX_KILL_MARKERS");
}

std::map<std::string, std::string> parameter_checksums(const std::string& output) {
  std::map<std::string, std::string> out;
  std::regex line("member (\\d+) rank \\d+: parameters crc32c (0x[0-9a-f]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

void expect_all_equal(const std::map<std::string, std::string>& sums, size_t ranks,
                      const std::string& output) {
  ASSERT_EQ(sums.size(), ranks) << output;
  for (const auto& [member, sum] : sums) {
    EXPECT_EQ(sum, sums.begin()->second) << "member " << member << "\n" << output;
  }
}

void expect_no_new_segments(const std::set<std::string>& before) {
  for (const std::string& name : shm_segments()) {
    if (before.count(name) || held_by_a_live_process(name)) continue;
    ADD_FAILURE() << "/dev/shm/" << name << " was left behind";
  }
}

}  // namespace ddpx::elastic_test
