// DIR/LOCK between real processes (checkpoint_lock.h): the file names the
// holder; another process is refused naming the holder's job, host and pid;
// the kernel releases the lock of a process killed with SIGKILL, and the
// next holder takes over.
#include "examples/trainer/checkpoint_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "examples/trainer/durable_file.h"
#include "gtest/gtest.h"

namespace ddpx::trainer {
namespace {

std::string fresh_dir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

// A child that takes the lock, writes 'y' (or 'n' when refused) to
// `ready_fd`, and then waits for SIGKILL.
pid_t child_holding(const std::string& dir, const std::string& job, int ready_fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    const absl::Status s = hold_checkpoint_lock(dir, job);
    const char byte = s.ok() ? 'y' : 'n';
    if (write(ready_fd, &byte, 1) != 1) _exit(3);
    if (s.ok()) pause();
    _exit(1);
  }
  return pid;
}

// The holder's identity is in the file; taking it again in the same process
// is a no-op. (A child forked afterwards would share the locked file, so
// the refusal is checked below with the child as the holder.)
TEST(CheckpointLockTest, TheFileNamesTheHolderAndHoldingTwiceIsANoOp) {
  const std::string dir = fresh_dir("lock_file");
  ASSERT_TRUE(hold_checkpoint_lock(dir, "jobA").ok());
  ASSERT_TRUE(hold_checkpoint_lock(dir, "jobA").ok());
  absl::StatusOr<std::string> text = read_whole_file(dir + "/" + kLockFile);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->find("job 'jobA' host "), 0u) << *text;
  EXPECT_NE(text->find(" pid " + std::to_string(getpid()) + "\n"), std::string::npos) << *text;
}

TEST(CheckpointLockTest, ASecondProcessIsRefusedNamingTheHolderUntilItIsKilled) {
  const std::string dir = fresh_dir("lock_message");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = child_holding(dir, "jobA", ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  absl::Status s = hold_checkpoint_lock(dir, "jobB");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("checkpoint folder " + dir + " belongs to another running job: job "
                             "'jobA' host "),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find(" pid " + std::to_string(holder) + " holds " + dir + "/LOCK"),
            std::string::npos)
      << s;
  // kill -9: the kernel drops the lock; this process takes the folder over.
  kill(holder, SIGKILL);
  ASSERT_EQ(waitpid(holder, nullptr, 0), holder);
  EXPECT_TRUE(hold_checkpoint_lock(dir, "jobB").ok());
  absl::StatusOr<std::string> text = read_whole_file(dir + "/" + kLockFile);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->find("job 'jobB' host "), 0u) << *text;
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace ddpx::trainer
