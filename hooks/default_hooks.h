// The stateless hooks of torch's default_hooks (PyTorch's "DDP Communication
// Hooks" documentation), and noop.
//
//   allreduce  buffer /= world size, then allreduce SUM: bit for bit what DDP
//              does with no hook (the reducer calls allreduce_average too).
//   fp16/bf16  cast to float16/bfloat16 dividing by the world size first (in
//              float32, one rounding: a gradient of 1e5 on 4 ranks does not
//              overflow float16), allreduce SUM, widen into the bucket.
//              torch casts first and divides in float16; for world sizes that
//              are powers of two the results are identical except where
//              torch's cast overflowed or went subnormal (docs/hooks.md).
//   fp16_compress_wrapper(h) / bf16_compress_wrapper(h)
//              run h on a copy of the bucket cast to float16/bfloat16 and
//              widen h's result into the original buffer (torch's wrappers:
//              fp16_compress_wrapper(allreduce) is torch's fp16 hook exactly).
//   noop       returns the buffer untouched, no communication: measures the
//              cost of everything around the hook.
//   noop:sync=1 (make_synchronizing_noop_hook) the same, but each bucket's
//              future completes when every rank has reached it (a barrier):
//              DDP's synchronization without its data, so a step measures
//              the wait for the slowest rank that no exchange can avoid.
//
// Every hook's future holds the bucket's buffer itself, averaged in place.
#ifndef DDPX_HOOKS_DEFAULT_HOOKS_H_
#define DDPX_HOOKS_DEFAULT_HOOKS_H_

#include <memory>

#include "hooks/comm_hook.h"
#include "hooks/hook_stats.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"
#include "core/tensor.h"

namespace ddpx {

// Divides `buffer` by pg.size() in place and allreduces it (SUM); the future
// completes with `buffer` holding the average. Shared with the reducer so
// that "no hook" and the allreduce hook run the same operations.
std::shared_ptr<Future<Tensor>> allreduce_average(ProcessGroup& pg,
                                                  const Tensor& buffer);

std::unique_ptr<CountingHook> make_allreduce_hook(std::shared_ptr<ProcessGroup> pg);
std::unique_ptr<CountingHook> make_fp16_compress_hook(std::shared_ptr<ProcessGroup> pg);
std::unique_ptr<CountingHook> make_bf16_compress_hook(std::shared_ptr<ProcessGroup> pg);
std::unique_ptr<CountingHook> fp16_compress_wrapper(std::unique_ptr<CommHook> hook);
std::unique_ptr<CountingHook> bf16_compress_wrapper(std::unique_ptr<CommHook> hook);
std::unique_ptr<CountingHook> make_noop_hook();
std::unique_ptr<CountingHook> make_synchronizing_noop_hook(std::shared_ptr<ProcessGroup> pg);

}  // namespace ddpx

#endif  // DDPX_HOOKS_DEFAULT_HOOKS_H_
