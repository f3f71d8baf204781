// Threads that complete torch futures of ddpx ops, off ddpx's workers.
//
// Completing a c10::ivalue::Future runs its callbacks on the completing
// thread, and a callback may issue another collective on the same group and
// wait for it (torch's powerSGD_hook does: compute_qs waits on the Q
// allreduce, torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py).
// On the ddpx worker that finished the op, which still holds its group's
// turn, that next op could never start. torch's ProcessGroupGloo marks a
// future complete from its worker after the op and its lock are done
// (ProcessGroupGloo::AsyncWork::finishWorkGloo, called from runLoop with
// workMutex_ released), so a callback blocks one worker while the next op
// runs on another. This pool gives the same guarantee without a bound: a
// task that finds no idle thread gets a new one, so callbacks that block on
// further completions (nested to any depth) never wait for themselves.
// Threads stay for the life of the process (they are few: as many as
// callbacks ever blocked at once, plus one).
#ifndef DDPX_PYTHON_CSRC_COMPLETION_POOL_H_
#define DDPX_PYTHON_CSRC_COMPLETION_POOL_H_

#include <functional>

namespace ddpx_torch {

// Runs `task` on a completion thread, soon: never behind a task that blocks.
void run_off_worker(std::function<void()> task);

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_COMPLETION_POOL_H_
