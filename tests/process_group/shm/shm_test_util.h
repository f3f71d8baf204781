// GlooBackends on the shared-memory path: ranks as threads of this process
// (which share its host, so the backend picks shared memory by itself).
#ifndef DDPX_TESTS_PROCESS_GROUP_SHM_SHM_TEST_UTIL_H_
#define DDPX_TESTS_PROCESS_GROUP_SHM_SHM_TEST_UTIL_H_

#include "process_group/gloo/gloo_backend.h"
#include "tests/process_group/gloo/gloo_test_util.h"

namespace ddpx {
namespace gloo_test {

// Small slots, so that a message of a few KiB already streams through
// several chunks and wraps around the slots; three, the fewest that the
// split reduction's pipeline takes (collectives.h).
inline GlooOptions shm_options(size_t slot_bytes = 4096, int slots = 3) {
  GlooOptions o = rank_threads::local_gloo_options();
  o.shared_memory = true;
  o.shm_slot_bytes = slot_bytes;
  o.shm_slots = slots;
  return o;
}

}  // namespace gloo_test
}  // namespace ddpx

#endif  // DDPX_TESTS_PROCESS_GROUP_SHM_SHM_TEST_UTIL_H_
