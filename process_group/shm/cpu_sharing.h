// Two ranks that wait for each other while the scheduler keeps them on one
// CPU. A wake-up from loopback TCP (a barrier, the store) tends to put the
// woken process on the waker's CPU, and two processes that take turns
// spinning and yielding on one CPU look balanced enough that the scheduler
// leaves them there while another CPU idles: each small op then costs two
// spins and two context switches (9-16 us instead of 1 us on a 2-vCPU VM).
// A waiter that finds its peer's last known CPU equal to its own therefore
// skips its spin, and one that keeps finding it so moves itself off.
#ifndef DDPX_PROCESS_GROUP_SHM_CPU_SHARING_H_
#define DDPX_PROCESS_GROUP_SHM_CPU_SHARING_H_

namespace ddpx {
namespace shm {

// The CPU the calling thread runs on, or -1 when the kernel does not say.
int current_cpu();

// Moves the calling thread off `cpu`: narrows its affinity to its allowed
// CPUs but `cpu` for one call, which migrates it, and restores the mask, so
// the program's own affinity is unchanged. False (and nothing changed) when
// `cpu` is the only CPU it may use or the kernel refuses.
bool move_off_cpu(int cpu);

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_CPU_SHARING_H_
