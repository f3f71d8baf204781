// Around an elastic job of examples/train: a kill armed before it starts,
// and what it leaves behind, checked after it ended: each rank's parameter
// checksum, and shared-memory segments.
#ifndef DDPX_TESTS_ELASTIC_JOB_CHECKS_H_
#define DDPX_TESTS_ELASTIC_JOB_CHECKS_H_

#include <map>
#include <set>
#include <string>

namespace ddpx::elastic_test {

// Arms DDPX_KILL_AT=`spec` (elastic/kill_point.h; each spec kills once per
// job, through a fresh DDPX_KILL_MARKERS folder under TEST_TMPDIR named
// after `name`) for the jobs started while it lives: their ranks and the
// replacements their launcher starts inherit it.
class KillAt {
 public:
  KillAt(const std::string& name, const std::string& spec);
  ~KillAt();
  KillAt(const KillAt&) = delete;
  KillAt& operator=(const KillAt&) = delete;
};

// member id -> "0x..." from each "member M rank R: parameters crc32c 0x..."
// line (examples/train --elastic prints one per rank that finished).
std::map<std::string, std::string> parameter_checksums(const std::string& output);

// Adds a gtest failure unless `sums` has `ranks` entries, all equal.
void expect_all_equal(const std::map<std::string, std::string>& sums, size_t ranks,
                      const std::string& output);

// Adds a gtest failure for each ddpx segment in /dev/shm that was not in
// `before` and that no live process holds (segment.cc: the creator holds a
// shared flock until it unlinks the name). The job under test has ended,
// so a held one belongs to another test running beside this one.
void expect_no_new_segments(const std::set<std::string>& before);

}  // namespace ddpx::elastic_test

#endif  // DDPX_TESTS_ELASTIC_JOB_CHECKS_H_
