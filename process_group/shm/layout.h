// The layout of one rank's shared-memory segment. Every field is written by
// the segment's owner only, except `sleepers`, which the peers waiting on
// the owner's signal count up and down.
//
//   [SegmentHeader][ChannelControl x num_channels][slots of channel 0][slots of channel 1]...
//
// A channel is the staging area of one backend worker: `num_slots` slots of
// `slot_bytes` each, used in turn by consecutive chunks of that worker's ops.
#ifndef DDPX_PROCESS_GROUP_SHM_LAYOUT_H_
#define DDPX_PROCESS_GROUP_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ddpx {
namespace shm {

inline constexpr uint64_t kSegmentMagic = 0x6464707873686d31ULL;  // "ddpxshm1"
inline constexpr uint32_t kLayoutVersion = 6;  // 6: boxes sealed at their end
inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPage = 4096;

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t rank;
  uint32_t world_size;
  uint32_t num_channels;
  uint32_t num_slots;
  uint32_t pid;            // the owner, for a quicker verdict when it dies
  uint64_t slot_bytes;
  uint64_t pid_namespace;  // inode of the owner's /proc/self/ns/pid
};

// One 32-bit word per cache line: a futex needs 32 bits, and words that
// different ranks write must not share a line.
struct alignas(kCacheLine) PaddedWord {
  std::atomic<uint32_t> value;
};
static_assert(sizeof(PaddedWord) == kCacheLine, "one word per cache line");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words");

// The line peers wait on: the owner's step counter, and beside it the
// stamp of its latest op (ChannelControl::stamps), so that the peer that
// sees a step usually finds the op to compare with in the same cache-line
// transfer.
struct alignas(kCacheLine) SignalLine {
  // How many steps the owner has completed on this channel (wraps); the
  // futex word.
  std::atomic<uint32_t> value;
  std::atomic<uint64_t> op_stamp;
};
static_assert(sizeof(SignalLine) == kCacheLine, "one line");

// The CPU the owner ran on when it began its latest op (-1: unknown), for a
// waiter to tell that it holds the CPU its peer needs (cpu_sharing.h). On a
// line of its own, stored only when it changes: a waiter that reads it
// does not take from the owner a line the owner writes in every op.
struct alignas(kCacheLine) CpuLine {
  std::atomic<int32_t> value;
};

// An inline box: a small allreduce's data as one run that ends where the
// box's seal (the step that publishes it, and the op's tag) begins, so the
// line a peer polls, the seal's, brings the data's last 56 bytes with it,
// and the lines before it hold nothing but data. The seal's place is fixed,
// so it never holds data of an earlier op that could pass for a seal. Data
// and seal go out in one copy and one store, and the peers reduce the run
// where it is (through a staging slot a peer would first take the step
// counter's line and only then ask for the data's; here the last of them
// comes with the step).
struct BoxSeal {
  // Stored last, with release; peers poll it.
  std::atomic<uint32_t> step;
  uint32_t op;  // Channel's tag of the op (its number and what it is)
};
// Up to 4 KiB and a line's worth more: to there one transfer per line
// beats a slot's, whose reader first takes the step counter's line.
inline constexpr size_t kBoxBytes = 4096 + kCacheLine - sizeof(BoxSeal);  // 4152 B
struct alignas(kCacheLine) InlineBox {
  // An op's nbytes are data[kBoxBytes - nbytes, kBoxBytes): right-aligned,
  // so every element sits at a multiple of its size (nbytes is one).
  uint8_t data[kBoxBytes];
  BoxSeal seal;

  // Where the data of an op of `nbytes` begins.
  uint8_t* run(size_t nbytes) { return data + (kBoxBytes - nbytes); }
  const uint8_t* run(size_t nbytes) const { return data + (kBoxBytes - nbytes); }
};
static_assert(sizeof(InlineBox) == kBoxBytes + sizeof(BoxSeal), "the seal ends the box");
static_assert(sizeof(InlineBox) % kCacheLine == 0, "whole lines");

struct ChannelControl {
  SignalLine signal;
  CpuLine cpu;
  // Peers asleep in futex_wait on `signal`; the owner wakes them only then.
  PaddedWord sleepers;
  // 0 while the owner's ops run; once one of its ops failed here, 1 + the
  // rank it was waiting for (or kNoCulprit): its peers then stop waiting on
  // it at once and say whom it was waiting for.
  PaddedWord abandoned;
  // What the owner's recent ops on this channel are (Channel::begin_op):
  // stamps[n % kOpStamps] describes its op number n, written before the
  // op's first step. A peer that has seen one of the owner's steps of op n
  // compares it with its own op n, so ranks that call different ops (or
  // sizes, or roots) fail at once instead of mixing unrelated data.
  static constexpr int kOpStamps = 16;
  alignas(kCacheLine) std::atomic<uint64_t> stamps[kOpStamps];
  // Allreduces of up to kBoxBytes go through these instead of a slot, in
  // turn: a box is rewritten two such ops later, after every peer has
  // posted the step that follows its reads of it (Channel::publish_box).
  InlineBox boxes[2];
};
inline constexpr uint32_t kNoCulprit = 0xffffffffu;
static_assert(std::atomic<uint64_t>::is_always_lock_free, "op stamps");

inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct Layout {
  uint32_t num_channels;
  uint32_t num_slots;
  size_t slot_bytes;  // a multiple of kPage

  size_t control_offset(uint32_t channel) const {
    return round_up(sizeof(SegmentHeader), kCacheLine) + channel * sizeof(ChannelControl);
  }
  size_t slots_offset() const {
    return round_up(control_offset(num_channels), kPage);
  }
  size_t slot_offset(uint32_t channel, uint32_t slot) const {
    return slots_offset() + (static_cast<size_t>(channel) * num_slots + slot) * slot_bytes;
  }
  size_t total_bytes() const { return slot_offset(num_channels, 0); }
};

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_LAYOUT_H_
