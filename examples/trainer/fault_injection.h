// FAULT INJECTION, for tests only (tests/flight_recorder): a communication
// hook around the real one that makes one rank misbehave at one step, so
// the flight recorder's tests can check that the other ranks fail naming it
// and that tools/trace_analyze finds it. examples/train's --inject_fault.
#ifndef DDPX_EXAMPLES_TRAINER_FAULT_INJECTION_H_
#define DDPX_EXAMPLES_TRAINER_FAULT_INJECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

struct InjectedFault {
  // skip_allreduce: the rank skips its first bucket's collective (the
  //   bucket keeps its own gradients);
  // wrong_count: its first bucket's allreduce has one element more;
  // wrong_root: every rank broadcasts a small tensor first, this one from
  //   root 1, the others from root 0;
  // sigstop / sigkill: it sends itself that signal.
  // kill_points: no fault of its own; every rank passes the hook's kill
  //   points (elastic/kill_point.h: "hook/run", "hook/issued", "hook/done"
  //   for each bucket), where DDPX_KILL_AT kills the rank it names.
  std::string kind;
  int rank = 1;
  int64_t step = 2;  // counted from 0 by the hook's calls for bucket 0
};

// "" (no fault) or one of the kinds above; the error names the flag.
absl::Status check_fault_kind(const std::string& kind);

// `inner` with `fault` injected on fault.rank at fault.step (every rank
// wraps its hook; only wrong_root changes what the other ranks do).
std::unique_ptr<CommHook> inject_fault(std::unique_ptr<CommHook> inner, InjectedFault fault,
                                       std::shared_ptr<ProcessGroup> pg);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_FAULT_INJECTION_H_
