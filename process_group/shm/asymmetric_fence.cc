#include "process_group/shm/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace ddpx {
namespace shm {
namespace {

long membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

}  // namespace

bool posts_may_skip_fence() {
  // Registration is per process and lasts its lifetime. It is done once
  // per pid, so that a child forked after its parent registered does not
  // rely on the parent's (registering twice is harmless). A refusal (an old
  // kernel, a seccomp filter) keeps the full fence in every post.
  static std::atomic<pid_t> registered_pid{0};
  static std::atomic<bool> registered{false};
  const pid_t pid = getpid();
  if (registered_pid.load(std::memory_order_acquire) != pid) {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    registered.store(supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
                         membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0,
                     std::memory_order_relaxed);
    registered_pid.store(pid, std::memory_order_release);
  }
  return registered.load(std::memory_order_relaxed);
}

bool fence_every_poster() { return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0; }

}  // namespace shm
}  // namespace ddpx
