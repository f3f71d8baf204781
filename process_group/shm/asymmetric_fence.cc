#include "process_group/shm/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ddpx {
namespace shm {
namespace {

long membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

}  // namespace

bool posts_may_skip_fence() {
  // Registration is per process and lasts its lifetime; a refusal (an old
  // kernel, a seccomp filter) keeps the full fence in every post.
  static const bool registered = [] {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    return supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
           membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
  }();
  return registered;
}

bool fence_every_poster() { return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0; }

}  // namespace shm
}  // namespace ddpx
