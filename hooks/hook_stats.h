// What a communication hook put on the wire, for the reducer's per-step
// statistics and the trainer's "bytes communicated".
//
// Two byte counts, because they answer different questions:
//  - payload_bytes: bytes this rank handed to collectives as input, the same
//    measure ProcessGroup::counters() keeps (so the two can be compared);
//  - wire_bytes: bytes this rank sends over the network when each collective
//    runs its bandwidth-optimal algorithm (ring allreduce sends
//    2 (p-1)/p of the buffer, allgather (p-1) times its input, ...).
// compression_ratio() compares wire_bytes with what a float32 allreduce of
// the same buckets would send: 2.0 for fp16, about 3.9 for int8.
#ifndef DDPX_HOOKS_HOOK_STATS_H_
#define DDPX_HOOKS_HOOK_STATS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "hooks/comm_hook.h"

namespace ddpx {

struct HookStats {
  uint64_t calls = 0;            // buckets the hook ran on
  uint64_t input_bytes = 0;      // bucket bytes handed to the hook
  uint64_t payload_bytes = 0;    // bytes handed to collectives
  uint64_t wire_bytes = 0;       // estimated bytes sent by this rank
  uint64_t baseline_wire_bytes = 0;  // same estimate for plain allreduce

  // baseline_wire_bytes / wire_bytes; 1 when nothing went on the wire.
  double compression_ratio() const;
  // "calls=3 input=12.0MB payload=6.0MB wire=6.0MB ratio=2.00".
  std::string str() const;
};

// Thread-safe accumulation (hooks complete on communication threads).
class HookStatsCounter {
 public:
  void add_call(uint64_t input_bytes, uint64_t baseline_wire_bytes);
  void add_traffic(uint64_t payload_bytes, uint64_t wire_bytes);
  HookStats snapshot() const;

 private:
  std::atomic<uint64_t> calls_{0}, input_{0}, payload_{0}, wire_{0}, baseline_{0};
};

// Bandwidth-optimal bytes sent per rank, for `world` ranks.
uint64_t allreduce_wire_bytes(uint64_t buffer_bytes, int world);
// `total_bytes` is this rank's whole alltoall input (world equal parts).
uint64_t alltoall_wire_bytes(uint64_t total_bytes, int world);
uint64_t allgather_wire_bytes(uint64_t input_bytes, int world);

// A hook that counts its traffic. Every hook in hooks/ is one.
class CountingHook : public CommHook {
 public:
  virtual HookStats stats() const = 0;
};

// The hook's statistics, or all zeros for a hook that does not count.
HookStats comm_hook_stats(const CommHook& hook);

}  // namespace ddpx

#endif  // DDPX_HOOKS_HOOK_STATS_H_
