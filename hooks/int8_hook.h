// The int8 min-max quantization hook (Bagua's ByteGrad, seed 001).
//
// Flat mode averages each bucket with bytegrad_average over the whole group.
// Hierarchical mode follows seed 001's four steps with nodes of `local_size`
// consecutive ranks (rank r is on node r / local_size; its leader is the
// node's first rank):
//   1. reduce (SUM, full precision) to the leader, which divides by the
//      local size;
//   2. the leaders average their node averages with the quantized exchange;
//   3. each leader broadcasts the result inside its node.
// So only the leaders' exchange is compressed; with local_size 1 the
// hierarchical hook is the flat hook, bit for bit.
//
// The subgroups (one per node, one of leaders) are built from the group's
// store with the group's backend when the hook is created: every rank of the
// group must create its hierarchical int8 hooks at the same time and in the
// same order (as with torch's new_group). Keep the hook alive until its
// futures complete (the reducer waits for every bucket anyway): the
// exchange's callbacks use the hook's groups without owning them.
#ifndef DDPX_HOOKS_INT8_HOOK_H_
#define DDPX_HOOKS_INT8_HOOK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hooks/hook_stats.h"
#include "process_group/process_group.h"

namespace ddpx {

struct Int8HookOptions {
  bool hierarchical = false;
  // Ranks per node in hierarchical mode; 0 reads LOCAL_WORLD_SIZE from the
  // environment. Must divide the group's size.
  int local_size = 0;
};

// Errors: a hierarchical hook without a local size, or one that does not
// divide the group's size, or a subgroup that could not be built.
absl::StatusOr<std::unique_ptr<CountingHook>> make_int8_hook(
    std::shared_ptr<ProcessGroup> pg, const Int8HookOptions& options = {});

}  // namespace ddpx

#endif  // DDPX_HOOKS_INT8_HOOK_H_
