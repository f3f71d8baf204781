// DistributedDataParallel for libtorch (PyTorch's C++ frontend): ddpx's
// reducer, hooks and backends under a torch::nn::Module.
//
//   auto pg = ddpx::init_process_group({}).value();          // env://, gloo
//   auto ddp = ddpx::torch::DistributedDataParallel::create(
//       model, pg, {.hook = "powersgd:rank=2,start_iter=10"}).value();
//   ... train as usual: after loss.backward() every gradient holds the
//   average over the ranks; optimizer.step() as before.
//
// Construction (collective) checks that every rank's module has the same
// parameters (names in the error), broadcasts parameters and buffers from
// rank 0, and puts a post-accumulate-grad hook on every trainable parameter
// (what torch's DDP does). During backward each hook hands its gradient to
// ddpx's Reducer the moment autograd has accumulated it, so buckets are
// communicated while the rest of backward runs; a callback queued on the
// autograd engine finalizes the step when backward ends (averaged
// gradients written back, buckets rebuilt after the first step, buffers
// broadcast from rank 0). Errors inside backward are thrown from
// backward() as ddpx::torch::DDPError.
//
// Modules on one device with contiguous float32/float64/float16/bfloat16
// parameters: the CPU, or (built with --config=cuda) a CUDA device, where
// DDP's collectives follow torch's current stream.
// This header does not include torch (the implementation does): it builds
// as C++17 or C++20.
#ifndef DDPX_REDUCER_TORCH_DISTRIBUTED_DATA_PARALLEL_H_
#define DDPX_REDUCER_TORCH_DISTRIBUTED_DATA_PARALLEL_H_

#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "process_group/front_end/process_group.h"
#include "reducer/distributed_data_parallel.h"
#include "reducer/join.h"
#include "reducer/reducer_stats.h"

namespace torch {
namespace nn {
class Module;
}  // namespace nn
namespace serialize {
class InputArchive;
class OutputArchive;
}  // namespace serialize
}  // namespace torch

namespace ddpx {
namespace torch {

struct DDPOptions {
  // Bucket caps in MiB: the first bucket (small, so communication starts
  // early) and the others (torch's bucket_cap_mb).
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  // The parameters' .grad() are views into the bucket buffers: no copy into
  // the bucket and back. Zero gradients in place
  // (optimizer.zero_grad(/*set_to_none=*/false)); a gradient set to none is
  // copied into its view by the next backward.
  bool gradient_as_bucket_view = false;
  // Parameters that get no gradient in a backward pass (not in the graph)
  // do not fail the step, as in torch's DDP: a parameter this rank did
  // not use contributes its current local gradient (zero after zero_grad,
  // zeros if .grad() is undefined) to the average, which it gets if some
  // rank used it; a parameter no rank used keeps its .grad() as it was
  // (undefined stays undefined, so optimizers skip it: no weight decay, no
  // momentum step).
  bool find_unused_parameters = false;
  // At the end of every synchronized step, rank 0's buffers (e.g. batch
  // norm running statistics) are broadcast to every rank (torch does it at
  // the next forward). Paused while a Join is active; the Join's final
  // model broadcast includes buffers.
  bool broadcast_buffers = true;
  // A communication hook by its registry name and options
  // (hooks/registry.h): "fp16", "bf16+powersgd:rank=2", "int8", ...; empty:
  // the default allreduce. Or register_comm_hook() later.
  std::string hook;
  // See ReducerOptions::overlap_hook_launches.
  bool overlap_hook_launches = false;
};

// What backward() throws when DDP fails inside it (a gradient reported
// twice, a module changed after wrapping, a communication error, ...).
class DDPError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DistributedDataParallel {
 public:
  // Collective: every rank of `pg` calls it with its replica of the model.
  // A tensor registered under several names (tied weights) is one parameter,
  // under its first name, as in Python's named_parameters(); give the
  // optimizer each tensor once too. Errors name the first parameter that
  // differs between ranks (shape, dtype, count), tensors on two devices or
  // on one this build does not take, a parameter that is not contiguous, a
  // parameter with sparse gradients (Embedding or EmbeddingBag with
  // sparse(true); a sparse gradient met in backward is a DDPError naming
  // it), a bad hook spec.
  static absl::StatusOr<std::unique_ptr<DistributedDataParallel>> create(
      std::shared_ptr<::torch::nn::Module> module, std::shared_ptr<ProcessGroup> pg,
      const DDPOptions& options = {});
  // For module holders (torch::nn::Linear, TORCH_MODULE(Net), ...).
  template <typename Holder, typename = decltype(std::declval<const Holder&>().ptr())>
  static absl::StatusOr<std::unique_ptr<DistributedDataParallel>> create(
      const Holder& module, std::shared_ptr<ProcessGroup> pg, const DDPOptions& options = {}) {
    return create(std::shared_ptr<::torch::nn::Module>(module.ptr()), std::move(pg), options);
  }
  // Removes the hooks. Not during backward.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Once per model, not during backward (a second hook is an error naming
  // both).
  absl::Status register_comm_hook(std::unique_ptr<CommHook> hook);
  absl::Status register_comm_hook(const std::string& spec);
  // The registered hook, or null.
  CommHook* comm_hook();

  // While the guard lives, backward passes only accumulate gradients
  // locally; the first backward after it averages the accumulated sum
  // (torch's `with ddp.no_sync():`).
  using NoSyncGuard = ::ddpx::DistributedDataParallel::NoSyncGuard;
  [[nodiscard]] NoSyncGuard no_sync();

  // What the last synchronized step cost (reducer/reducer_stats.h).
  const ReducerStats& stats() const;

  // DDP's state for checkpoints, per rank: the bucket layout after the
  // rebuild (the hook's state is laid out per bucket) and the hook's state
  // (PowerSGD's error feedback, Qs and iteration). Saved with the model and
  // optimizer, loaded before the first step of the resumed run, it makes
  // the run continue bit for bit. Not during backward.
  absl::Status save_state(std::ostream& out) const;
  absl::Status load_state(std::istream& in);
  // The same inside a torch archive (key "ddpx_state", a uint8 tensor),
  // next to model->save(archive) and optimizer.save(archive). Throw
  // DDPError.
  void save(::torch::serialize::OutputArchive& archive) const;
  void load(::torch::serialize::InputArchive& archive);
  // The hook's iteration counter (CommHook::state_iteration), -1 if none.
  int64_t hook_iteration() const;

  // Parameter names (module->named_parameters() order, each tensor once):
  // index i of ReducerStats, errors and bucket_assignment().
  const std::vector<std::string>& parameter_names() const;
  // Parameter names per bucket, in launch order (changes once, after the
  // first synchronized step, to the order gradients became ready).
  std::vector<std::vector<std::string>> bucket_assignment() const;

  ::torch::nn::Module& module();
  const std::shared_ptr<ProcessGroup>& process_group() const;
  // ddpx's DDP over mirrors of the module's tensors (same memory).
  ::ddpx::DistributedDataParallel& core();

  struct Impl;

 private:
  explicit DistributedDataParallel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Join;
};

// Uneven inputs (torch's Join context manager for DDP; reducer/join.h):
//
//   ddpx::torch::Join join(*ddp);
//   for (auto& batch : my_batches) { ...forward, backward, step... }
//   absl::Status s = join.join();   // shadows the others until all are done
//
// Every rank creates it before its loop; a rank that runs out of batches
// calls join() and takes part in the others' collectives with zero
// gradients until all ranks have joined; then every replica gets the model
// (parameters and buffers) of the last rank to join.
class Join {
 public:
  explicit Join(DistributedDataParallel& ddp, JoinOptions options = {});
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;
  absl::Status join();
  int64_t shadowed_steps() const { return join_.shadowed_steps(); }

 private:
  DistributedDataParallel& ddp_;
  ::ddpx::Join join_;
  bool joined_ = false;
};

}  // namespace torch
}  // namespace ddpx

#endif  // DDPX_REDUCER_TORCH_DISTRIBUTED_DATA_PARALLEL_H_
