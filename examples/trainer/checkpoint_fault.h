// A precise instant for the checkpoint kill test
// (tests/integration/train_checkpoint_kill_test.cc).
//
// With DDPX_CHECKPOINT_STOP_AT="<step>:<rank>:<point>:<marker path>" in its
// environment, the rank `rank` that reaches `point` while writing the
// checkpoint of `step` creates the marker file and stops itself (SIGSTOP).
// The test waits for the marker and then kills the whole job with SIGKILL,
// so the crash lands exactly there rather than wherever a timer fell. Points
// are named by checkpoint.cc ("begin", "state/tmp_half", "files_done",
// "manifest/renamed", "latest/renamed", ...). Without the variable this is a
// no-op. The same instants are kill points (elastic/kill_point.h) named
// "checkpoint/<point>" with the step as `at`, for the elastic kill matrix
// (tests/elastic/kill_matrix_test.cc): DDPX_KILL_AT=checkpoint/state/tmp_synced:0:10
// kills rank 0 before it renames its file of step 10's checkpoint.
//
// With DDPX_CHECKPOINT_READ_EIO="<path suffix>" in its environment, every
// read of a checkpoint file whose path ends with the suffix fails as a
// read(2) returning EIO would (the resume I/O-error test: an I/O error is
// not proof that a checkpoint is damaged). Without the variable reads are
// untouched.
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_FAULT_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_FAULT_H_

#include <cstdint>
#include <string>

namespace ddpx::trainer {

void checkpoint_stop_point(int64_t step, int rank, const std::string& point);

// The errno an injected read error of `path` fails with (EIO), or 0.
int checkpoint_read_errno(const std::string& path);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_FAULT_H_
