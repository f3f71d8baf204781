// The int8 min-max quantization hook (Bagua's ByteGrad, bytegrad.h).
//
// Flat mode averages each bucket with bytegrad_average over the whole group.
// Hierarchical mode keeps full precision inside a host and quantizes only
// across hosts, in three steps over L ranks per host:
//   1. reduce-scatter (SUM, float32) inside the host; local rank j divides
//      its slice j (1/L of the bucket) by L: the host's average;
//   2. every local rank j averages its slice with the ranks of local rank j
//      on the other hosts, with the quantized exchange: all L slices cross
//      the hosts' links at once;
//   3. allgather inside the host.
// A single leader per host sending the whole bucket would put the same
// int8 bytes on the uplink (plus L-1 fewer record headers per chunk) but in
// one stream, while the other L-1 ranks wait; the slices use all L.
//
// Hosts and subgroups come from host_placement() and host_subgroups()
// (process_group/rendezvous/init.h): the `local_size` option (nodes of that many
// consecutive ranks), else the hosts the group's backend saw at rendezvous,
// else LOCAL_WORLD_SIZE. With one rank per host the hierarchical hook is the
// flat hook, bit for bit. The subgroups are built once per group, when its
// first hierarchical hook is created: every rank of the group must create
// its hierarchical int8 hooks at the same time and in the same order (as
// with torch's new_group); later hooks share them, so two hierarchical hooks
// of one group must not exchange buckets at the same time (each hook orders
// its own collectives only).
//
// CPU buckets go through int8_pipeline.h (pieces, one thread per hook):
// destroying the hook fails the buckets not yet started and finishes the
// running one. Device buckets (flat mode) go through bytegrad_average, whose
// callbacks own the groups they use, so the hook may go before those
// futures.
#ifndef DDPX_HOOKS_INT8_HOOK_H_
#define DDPX_HOOKS_INT8_HOOK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hooks/hook_stats.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {

struct Int8HookOptions {
  bool hierarchical = false;
  // Ranks per node in hierarchical mode (consecutive ranks); 0 takes the
  // group's hosts (host_placement() in process_group/rendezvous/init.h). Must divide
  // the group's size.
  int local_size = 0;
};

// Errors: a hierarchical hook without a way to tell the hosts, a local size
// that does not divide the group's size, hosts with different rank counts,
// or a subgroup that could not be built.
absl::StatusOr<std::unique_ptr<CountingHook>> make_int8_hook(
    std::shared_ptr<ProcessGroup> pg, const Int8HookOptions& options = {});

}  // namespace ddpx

#endif  // DDPX_HOOKS_INT8_HOOK_H_
