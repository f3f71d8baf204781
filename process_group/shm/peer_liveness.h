// Whether a peer rank's process has gone, asked by a rank that waits for
// that peer (channel.h) between its sleeps: a peer killed mid-op fails the
// ranks waiting for it at once, not at the op's deadline.
//
// Either of two signs is enough:
//  - The peer's process has ended. A pidfd (pidfd_open(2), Linux >= 5.3)
//    polls readable from the moment the process exits, whether or not its
//    parent has reaped it yet (a process that has died but whose parent has
//    not called wait() is a zombie, and kill(pid, 0) still succeeds for
//    it). Without pidfds (older kernels, seccomp filters) the state in
//    /proc/<pid>/stat (Z or X) says so, or kill()'s ESRCH once it is reaped.
//    Only for a peer in this pid namespace: elsewhere its pid names another
//    process here, or none.
//  - The peer no longer holds its segment (Segment::creator_gone): the
//    kernel drops the peer's lock when its last descriptor closes, at exit,
//    in any pid namespace. A child the peer forked inherits the descriptor
//    and holds the lock on, which the first sign does not miss.
#ifndef DDPX_PROCESS_GROUP_SHM_PEER_LIVENESS_H_
#define DDPX_PROCESS_GROUP_SHM_PEER_LIVENESS_H_

#include <cstdint>
#include <string>

#include "process_group/shm/segment.h"

namespace ddpx {
namespace shm {

class PeerLiveness {
 public:
  // Watches nothing: never says gone.
  PeerLiveness() = default;
  // `pid` as the peer wrote it in its segment header (used only when
  // `same_pid_namespace`); `segment`: this rank's mapping of the peer's
  // segment, which outlives this object (may be null).
  PeerLiveness(uint32_t pid, bool same_pid_namespace, const Segment* segment);
  PeerLiveness(PeerLiveness&& other) noexcept;
  PeerLiveness& operator=(PeerLiveness&& other) noexcept;
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;
  ~PeerLiveness();

  // Null while the peer may be running; else how it went, for an error
  // message ("exited", or "exited or closed its shared-memory group" when
  // only its segment says so). Two system calls; meant for a waiter that
  // has slept.
  const char* gone() const;
  // "pid 1234", or "pid 1234 in another pid namespace".
  std::string who() const;

 private:
  bool process_ended() const;

  uint32_t pid_ = 0;
  bool same_pid_namespace_ = false;
  int pidfd_ = -1;  // -1: none (other namespace, or no pidfds here)
  const Segment* segment_ = nullptr;
};

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_PEER_LIVENESS_H_
