// Finding the processes a launcher started as ranks, for tests that kill or
// stop one of them (tests/elastic, tests/integration).
#ifndef DDPX_TESTS_TESTING_RANK_PROCESSES_H_
#define DDPX_TESTS_TESTING_RANK_PROCESSES_H_

#include <sys/types.h>

namespace ddpx::rank_processes {

// The live child of `parent` whose environment holds RANK=<rank> (the
// launcher's slot, examples/launcher), or -1 when there is none. Zombies
// (ranks that exited and are not yet reaped) do not count: a test that
// kills the pid returned must hit a process that still runs.
pid_t find_rank_process(pid_t parent, int rank);

}  // namespace ddpx::rank_processes

#endif  // DDPX_TESTS_TESTING_RANK_PROCESSES_H_
