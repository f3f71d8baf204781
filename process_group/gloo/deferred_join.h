// Joining a thread that cannot be joined where it is shut down.
//
// A group's last reference may be released inside a callback, and callbacks
// run on the group's own threads (a Gloo worker, a point-to-point waiter).
// The backend's destructor then shuts down the very pool the calling thread
// belongs to, and no thread can join itself. Instead the pool hands that
// thread over here and returns; the thread finishes its current task
// (touching nothing the pool owned but what it keeps alive itself) and ends.
// It is joined once it has ended: by the next hand-over, or at exit (where
// a thread still running, say a callback that never returns, is detached
// rather than waited for).
#ifndef DDPX_PROCESS_GROUP_GLOO_DEFERRED_JOIN_H_
#define DDPX_PROCESS_GROUP_GLOO_DEFERRED_JOIN_H_

#include <atomic>
#include <memory>
#include <thread>

namespace ddpx {

// Takes `thread` (the calling thread itself, typically); `finished` turns
// true when its function has returned, or is about to.
void join_when_finished(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_DEFERRED_JOIN_H_
