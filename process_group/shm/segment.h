// A POSIX shared-memory segment in /dev/shm that one rank creates and its
// peers on the same host map.
//
// Lifetime: the creator names it `ddpx.<job token>.<suffix>`, holds a shared
// flock() on it from creation until it is unlinked, and unlinks it as soon
// as every peer has mapped it (the mapping outlives the name). A job killed
// in that window leaves the name behind; sweep_stale_segments() removes
// every `ddpx.*` entry whose creator is gone (nobody holds its lock), so the
// next job on the host cleans up after it. The space is reserved with
// posix_fallocate(): a full /dev/shm is an error at creation, never a
// SIGBUS at the first write.
//
// Trust: a segment is created with mode 0600, and open() maps only a
// regular file that belongs to this process's effective user and that no
// group or other user may access. Whoever can write the rendezvous store
// can name any segment to the ranks; a segment another local user made (or
// could write) would let that user read the ranks' data and steer their
// synchronization, so it is refused with an error naming the segment and
// what is wrong, never mapped.
//
// Liveness: the creator also holds an open-file-description lock
// (F_OFD_SETLK, read) on the segment's first byte for as long as it holds
// the Segment. The kernel drops it when the last descriptor of it closes:
// at the creator's exit, whether or not its parent has reaped it and in
// whatever pid namespace it runs, or when it destroys the Segment. Peers
// ask with creator_gone().
#ifndef DDPX_PROCESS_GROUP_SHM_SEGMENT_H_
#define DDPX_PROCESS_GROUP_SHM_SEGMENT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace ddpx {
namespace shm {

// Where POSIX shared memory lives on Linux (shm_open's directory).
inline constexpr char kShmDirectory[] = "/dev/shm";
// Every segment's name starts with this (the sweep looks for nothing else).
inline constexpr char kSegmentPrefix[] = "ddpx.";

class Segment {
 public:
  // Creates `name` (no leading slash) with `bytes` reserved, maps it, and
  // takes the creator's lock. Fails if the name exists or the space is not
  // there; the error names the segment, its size and the cause.
  static absl::StatusOr<Segment> create(const std::string& name, size_t bytes);
  // Maps an existing segment of exactly `bytes` that this user owns and
  // nobody else may access (above); keeps its descriptor for
  // creator_gone().
  static absl::StatusOr<Segment> open(const std::string& name, size_t bytes);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  // Unmaps; unlinks too if this is the creator and unlink() was not called.
  ~Segment();

  // Removes the name (the creator's job); the mapping stays valid. Idempotent.
  void unlink();

  // For a segment mapped with open(): whether its creator no longer holds
  // it (its process ended, or it destroyed its Segment). False where the
  // kernel cannot tell (no OFD locks), and for the creator's own Segment.
  bool creator_gone() const;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void release();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  // Open for the Segment's life: the creator's holds the liveness lock (and
  // the flock until unlink()); an opener's asks about the creator's.
  int fd_ = -1;
  bool created_ = false;  // by this Segment (create())
  bool linked_ = false;   // the creator's name still exists
};

// Unlinks every `ddpx.*` segment in /dev/shm whose creator no longer holds
// its lock (a process that died before unlinking it). Segments still being
// set up by a live process are left alone. Returns how many it removed.
int sweep_stale_segments();

// The number of `ddpx.*` entries in /dev/shm now (tests count them).
int count_segments();

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_SEGMENT_H_
