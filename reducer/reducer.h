// The gradient reducer: buckets a model's gradients and averages them across
// ranks while backward is still running (PyTorch's "Distributed Data Parallel"
// design note, https://pytorch.org/docs/stable/notes/ddp.html).
//
// One synchronized step:
//   reducer.prepare_for_backward();      // optional; implied by mark_ready
//   ... backward: after parameter i's gradient is accumulated into
//       model.parameter(i).grad, call reducer.mark_ready(i) ...
//   reducer.finalize_backward();         // averaged gradients are in .grad
//
// mark_ready copies the gradient into its bucket's flat buffer (with
// gradient_as_bucket_view the gradient already is a view into it); without a
// comm hook it divides by the world size in that same pass, as torch's
// reducer does (divide_into_bucket.h). Once every gradient of a bucket is in,
// and every earlier bucket has been launched, the bucket goes to the comm
// hook (or, without one, an allreduce SUM of the divided gradients), so
// buckets launch in the same order on every rank and communication overlaps
// the rest of backward. finalize_backward waits for
// all buckets and writes the averaged values back into the gradients.
//
// Buckets start in reverse registration order; at the end of the first
// synchronized step they are rebuilt once from the order in which gradients
// became ready on rank 0 (broadcast, so every rank gets the same layout).
//
// Unused parameters: with find_unused_parameters, a parameter not marked by
// finalize_backward() is marked ready then with its current local gradient
// (zero after zero_grad(), or what no_sync steps accumulated), and
// prepare_for_backward(unused) marks known-unused ones at the start so their
// buckets need not wait for finalize. finalize_backward() then allreduces
// which parameters each rank used (marked through mark_ready, in this step
// or the no_sync steps before it): one that some rank used gets the average;
// one that no rank used keeps its grad exactly as it was (torch's rule, so
// weight decay and momentum treat it as torch's optimizers treat an
// untouched grad). Without the flag, finalize_backward() fails naming the
// parameters that got no gradient.
//
// The reducer is driven from one thread (the one running backward); hooks'
// futures may complete on communication threads.
#ifndef DDPX_REDUCER_REDUCER_H_
#define DDPX_REDUCER_REDUCER_H_

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hooks/comm_hook.h"
#include "hooks/grad_bucket.h"
#include "process_group/front_end/process_group.h"
#include "reducer/flat_buckets.h"
#include "reducer/model_parameters.h"
#include "reducer/reducer_stats.h"

namespace ddpx {

struct ReducerOptions {
  // Bucket size cap, and the smaller cap of each dtype's first bucket (so
  // the first gradients ready start communicating early), in MiB.
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  // Gradients become views into the bucket buffers: no copy in mark_ready or
  // finalize, and no second copy of the gradients in memory.
  bool gradient_as_bucket_view = false;
  bool find_unused_parameters = false;
  // A hook whose issues_collectives_after_run() is true (PowerSGD, int8,
  // unknown hooks) starts bucket k+1 only after bucket k's future completed
  // (see launch_ready_buckets). Set this to overlap them anyway when you
  // know a custom hook issues every collective inside run().
  bool overlap_hook_launches = false;
};

class Reducer {
 public:
  // `model` must outlive the reducer; its trainable (requires_grad)
  // parameters are bucketed. With gradient_as_bucket_view their `grad`
  // becomes a view into a bucket (keeping its current values).
  static absl::StatusOr<std::unique_ptr<Reducer>> create(
      ModelParameters& model, std::shared_ptr<ProcessGroup> pg,
      const ReducerOptions& options);
  ~Reducer();

  // Once per model, before or between steps (not during backward).
  absl::Status register_comm_hook(std::unique_ptr<CommHook> hook);
  const CommHook* comm_hook() const { return hook_.get(); }
  // Hook state for checkpoints; nothing is written or read without a hook.
  absl::Status save_hook_state(std::ostream& out) const;
  absl::Status load_hook_state(std::istream& in);

  // Starts a step. With find_unused_parameters, `unused_params` (model
  // parameter indices) are marked ready at once; without it they are an
  // error. Under Join this is where this rank tells the others it is active.
  absl::Status prepare_for_backward(const std::vector<size_t>& unused_params = {});
  // Parameter `param_index`'s gradient is final for this backward pass.
  absl::Status mark_ready(size_t param_index);
  // Waits for every bucket and writes the averaged gradients back. On error
  // the step is abandoned (launched buckets are drained first).
  absl::Status finalize_backward();
  // Gives up the step in progress without communicating any further, for a
  // backward pass an exception cut short: waits for the buckets already
  // launched and forgets the rest. Gradients are left as they are (not
  // averaged). Ranks that finished the step are then a step ahead of this
  // one. Nothing happens outside a step.
  void abandon_step();
  bool in_step() const { return in_step_; }

  // no_sync: while false, steps only accumulate gradients locally.
  void set_require_grad_sync(bool sync) { require_grad_sync_ = sync; }
  bool require_grad_sync() const { return require_grad_sync_; }

  // --- Join support (reducer/join.h drives these) ---
  // While enabled, every synchronized step starts with an allreduce in which
  // each rank says whether it is still active; a rank that has run out of
  // inputs answers with shadow_step() calls instead.
  void set_join_enabled(bool enabled, bool throw_on_early_termination);
  // Allreduces this rank's active flag; returns the ranks that are active.
  absl::StatusOr<std::vector<int>> exchange_active_ranks(bool active);
  // Issues the collectives of one synchronized step with zero gradients.
  absl::Status shadow_step();

  // --- Checkpoints ---
  // Hook state (PowerSGD's error feedback and Qs) is laid out per bucket, so
  // a resumed run needs the buckets the saved run had. rebuilt_order() is
  // the order (model parameter indices) the buckets were rebuilt from, the
  // same on every rank; empty before the rebuild.
  std::vector<size_t> rebuilt_order() const;
  // Builds the buckets from a saved rebuilt_order() and skips the rebuild
  // after the next step. Not during a step; an empty order does nothing.
  // Errors on an order that is not a permutation of the trainable
  // parameters.
  absl::Status restore_rebuilt_order(const std::vector<size_t>& order);

  // --- Introspection ---
  // Model parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_assignment() const;
  bool buckets_rebuilt() const { return rebuilt_; }
  // Stats of the last synchronized step.
  const ReducerStats& last_stats() const { return stats_; }
  // With find_unused_parameters: the model parameter indices no rank used
  // in the last synchronized step (their grads were left as they were).
  const std::vector<size_t>& globally_unused() const { return globally_unused_; }
  ProcessGroup& process_group() { return *pg_; }
  const ReducerOptions& options() const { return options_; }

 private:
  struct Bucket {
    FlatBucket flat;   // members are variable indices
    size_t pending = 0;
    std::unique_ptr<GradBucket> grad_bucket;  // alive while the hook runs
    std::shared_ptr<Future<Tensor>> result;
  };
  struct Location {
    size_t bucket = 0;
    size_t slot = 0;
  };

  Reducer(ModelParameters& model, std::shared_ptr<ProcessGroup> pg,
          const ReducerOptions& options, std::vector<size_t> variables);

  Parameter& variable(size_t v) { return model_.parameter(variables_[v]); }
  std::vector<Tensor> variable_values() const;
  std::vector<Tensor> variable_grads() const;
  std::vector<size_t> size_limits() const;
  // Builds buckets_ and locations_ for `order` (variable indices).
  absl::Status build_buckets(const std::vector<size_t>& order);
  absl::StatusOr<size_t> variable_of(size_t param_index, const char* what) const;
  absl::Status start_step();
  absl::Status mark_variable_ready(size_t v);
  // Whether mark_variable_ready divides each gradient by the world size as
  // it enters `bucket` (no hook, a CPU bucket; divide_into_bucket.h), so
  // that run_hook only sums it.
  bool divides_into_buckets(const Tensor& bucket) const;
  bool serialize_launches() const;
  std::unique_ptr<GradBucket> make_grad_bucket(size_t b, const Tensor& buffer);
  void launch_bucket(size_t b);
  void launch_ready_buckets();
  absl::Status launch_remaining();
  std::shared_ptr<Future<Tensor>> run_hook(GradBucket& bucket);
  // Waits for every launched bucket; returns the first error.
  absl::Status wait_launched(double* waited_seconds);
  // Allreduces used_ (find_unused_parameters); fills globally_unused_.
  absl::Status exchange_used(const std::vector<bool>& used);
  absl::Status write_back();
  absl::Status rebuild_buckets();
  void end_step();
  std::chrono::milliseconds wait_timeout() const;

  ModelParameters& model_;
  std::shared_ptr<ProcessGroup> pg_;
  const ReducerOptions options_;
  std::vector<size_t> variables_;        // variable -> model parameter index
  std::vector<int> variable_of_param_;   // model parameter -> variable, or -1
  std::vector<Bucket> buckets_;
  std::vector<Location> locations_;      // per variable
  std::unique_ptr<CommHook> hook_;
  // The flight recorder's call site of bucket collectives ("ddp:fp16").
  std::string trace_site_ = "ddp:allreduce";

  bool require_grad_sync_ = true;
  bool join_enabled_ = false;
  bool throw_on_early_termination_ = false;
  bool rebuilt_ = false;
  std::vector<size_t> ready_order_;      // first synchronized step only
  std::vector<size_t> rebuilt_order_;    // variable indices, after the rebuild
  // Per variable: marked through mark_ready since the last synchronized
  // step (no_sync steps included), as torch's local_used_map.
  std::vector<bool> used_;
  std::vector<bool> globally_used_;      // the last synchronized step's
  std::vector<size_t> globally_unused_;  // model parameter indices

  // Per step.
  bool in_step_ = false;
  bool step_syncs_ = false;
  std::vector<bool> marked_;
  size_t next_to_launch_ = 0;
  size_t unused_this_step_ = 0;
  int active_ranks_ = 0;
  uint64_t payload_at_start_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  ReducerStats stats_;
};

}  // namespace ddpx

#endif  // DDPX_REDUCER_REDUCER_H_
