#include "process_group/shm/cpu_sharing.h"

#include <sched.h>

namespace ddpx {
namespace shm {

int current_cpu() { return sched_getcpu(); }

bool move_off_cpu(int cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return false;
  }
  cpu_set_t elsewhere = allowed;
  CPU_CLR(cpu, &elsewhere);
  if (CPU_COUNT(&elsewhere) == 0) return false;
  if (sched_setaffinity(0, sizeof(elsewhere), &elsewhere) != 0) return false;
  // The thread runs elsewhere from here; the program's mask comes back.
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return true;
}

}  // namespace shm
}  // namespace ddpx
