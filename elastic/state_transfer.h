// Sending the training state to the members a generation admitted, over
// the process group (not through disk): one broadcast of its size, one of
// its bytes, from `root` (rank 0 of the generation, which always held the
// state before: elastic_group.h).
#ifndef DDPX_ELASTIC_STATE_TRANSFER_H_
#define DDPX_ELASTIC_STATE_TRANSFER_H_

#include <string>

#include "absl/status/status.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::elastic {

// Collective. On `root`, `blob` is sent; on every other rank it is replaced
// by what root sent.
absl::Status broadcast_state(ProcessGroup& pg, int root, std::string* blob);

}  // namespace ddpx::elastic

#endif  // DDPX_ELASTIC_STATE_TRANSFER_H_
