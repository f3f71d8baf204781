// FAULT INJECTION, for tests only (tests/elastic/kill_matrix_test.cc): named
// instants at which a process kills itself with SIGKILL, so a kill -9 lands
// exactly there (inside a bucket's allreduce, in the optimizer step, while
// a generation forms) rather than wherever a timer fell.
//
// With DDPX_KILL_AT="<point>:<rank>:<n>[,...]" in its environment, a
// process that reaches `point` while it is rank `rank` of its generation
// ("*": any rank) announces it on stderr ("ddpx: KILL POINT ...") and
// raises SIGKILL, at `n`: where the call passes `at` (the generation being
// formed, the step being voted), when `at` equals n; else on the n-th time
// this process reaches the point (counted from 1; every rank passes a
// per-step point once per step). With DDPX_KILL_MARKERS=<folder> too, each
// spec kills once per job, not once per process: the first process to
// create <folder>/<spec index> dies, so a step retaken in the next
// generation (whose rank `rank` is another process) does not kill again.
// Without DDPX_KILL_AT each call is one load of a flag.
#ifndef DDPX_ELASTIC_KILL_POINT_H_
#define DDPX_ELASTIC_KILL_POINT_H_

#include <cstdint>

namespace ddpx::elastic {

void kill_point(const char* point, int rank, int64_t at = -1);

}  // namespace ddpx::elastic

#endif  // DDPX_ELASTIC_KILL_POINT_H_
