// Hooks by name, so a trainer swaps them with a flag.
//
//   spec    := part ("+" part)*
//   part    := name [":" key "=" value ("," key "=" value)*]
//
// The last part is the hook; every part before it is a wrapper applied
// around it, innermost last: "fp16+powersgd:rank=2" is
// fp16_compress_wrapper(powerSGD_hook). Names:
//   allreduce, fp16, bf16, noop          no options
//   int8                                 hierarchical=0|1, local_size=N
//   powersgd, batched_powersgd           see parse_powersgd_options
//   fp16, bf16 (before a "+")            the compress wrappers
// Errors name the bad part and list what exists.
#ifndef DDPX_HOOKS_REGISTRY_H_
#define DDPX_HOOKS_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "process_group/front_end/process_group.h"

namespace ddpx {

struct HookSpecPart {
  std::string name;
  std::map<std::string, std::string> options;
};

// Splits a spec into its parts (no check that the names exist).
absl::StatusOr<std::vector<HookSpecPart>> parse_hook_spec(const std::string& spec);

absl::StatusOr<std::unique_ptr<CommHook>> make_comm_hook(
    const std::string& spec, std::shared_ptr<ProcessGroup> pg);

// The hook names make_comm_hook accepts, and the wrapper names.
std::vector<std::string> comm_hook_names();
std::vector<std::string> comm_hook_wrapper_names();

}  // namespace ddpx

#endif  // DDPX_HOOKS_REGISTRY_H_
