#include "reducer/reducer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reducer/bucket_assignment.h"
#include "reducer/control_tensor.h"
#include "reducer/divide_into_bucket.h"
#include "hooks/default_hooks.h"
#include "process_group/tracing/flight_recorder.h"

namespace ddpx {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// How many names an error message lists before "and N more".
constexpr size_t kMaxNamesInError = 8;

}  // namespace

absl::StatusOr<std::unique_ptr<Reducer>> Reducer::create(
    ModelParameters& model, std::shared_ptr<ProcessGroup> pg,
    const ReducerOptions& options) {
  if (pg == nullptr) return absl::InvalidArgumentError("Reducer: process group is null");
  if (!(options.bucket_cap_mb > 0) || !(options.first_bucket_cap_mb > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Reducer: bucket caps must be positive, got bucket_cap_mb=", options.bucket_cap_mb,
        " first_bucket_cap_mb=", options.first_bucket_cap_mb));
  }
  std::vector<size_t> variables;
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    const Parameter& p = model.parameter(i);
    if (!p.requires_grad) continue;
    if (absl::Status s = check_same_layout(p.grad, p.value, "parameter '" + p.name + "' grad");
        !s.ok()) {
      return s;
    }
    if (p.grad.shape() != p.value.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", p.name, "': grad has shape ", shape_str(p.grad.shape()),
          ", value has ", shape_str(p.value.shape())));
    }
    if (!is_floating_point(p.value.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", p.name, "' is ", p.value.str(),
          "; only floating-point parameters can require grad"));
    }
    variables.push_back(i);
  }
  std::unique_ptr<Reducer> r(new Reducer(model, std::move(pg), options, std::move(variables)));
  if (absl::Status s = r->build_buckets(reverse_order(r->variables_.size())); !s.ok()) return s;
  return r;
}

Reducer::Reducer(ModelParameters& model, std::shared_ptr<ProcessGroup> pg,
                 const ReducerOptions& options, std::vector<size_t> variables)
    : model_(model),
      pg_(std::move(pg)),
      options_(options),
      variables_(std::move(variables)),
      variable_of_param_(model.num_parameters(), -1) {
  for (size_t v = 0; v < variables_.size(); ++v) variable_of_param_[variables_[v]] = static_cast<int>(v);
  used_.assign(variables_.size(), false);
  globally_used_.assign(variables_.size(), true);
  stats_.active_ranks = pg_->size();
  stats_.hook = "default (allreduce)";
}

Reducer::~Reducer() {
  // Communication may still write into bucket buffers; let it finish.
  if (in_step_) {
    double ignored = 0;
    wait_launched(&ignored).IgnoreError();
  }
}

std::vector<Tensor> Reducer::variable_values() const {
  std::vector<Tensor> out;
  for (size_t p : variables_) out.push_back(model_.parameter(p).value);
  return out;
}

std::vector<Tensor> Reducer::variable_grads() const {
  std::vector<Tensor> out;
  for (size_t p : variables_) out.push_back(model_.parameter(p).grad);
  return out;
}

std::vector<size_t> Reducer::size_limits() const {
  return {mb_to_bytes(options_.first_bucket_cap_mb), mb_to_bytes(options_.bucket_cap_mb)};
}

absl::Status Reducer::build_buckets(const std::vector<size_t>& order) {
  std::vector<Tensor> values = variable_values();
  absl::StatusOr<std::vector<BucketSpec>> specs =
      compute_bucket_assignment(gradient_specs(values), order, size_limits());
  if (!specs.ok()) return specs.status();
  absl::StatusOr<std::vector<FlatBucket>> flats = make_flat_buckets(*specs, values);
  if (!flats.ok()) return flats.status();

  std::vector<Bucket> buckets(flats->size());
  std::vector<Location> locations(variables_.size());
  for (size_t b = 0; b < flats->size(); ++b) {
    buckets[b].flat = std::move((*flats)[b]);
    const FlatBucket& flat = buckets[b].flat;
    for (size_t k = 0; k < flat.members.size(); ++k) locations[flat.members[k]] = {b, k};
    if (options_.gradient_as_bucket_view) {
      // Keep the gradients' current values (accumulated or averaged), then
      // make the views the gradients.
      if (absl::Status s = copy_into_bucket(flat, variable_grads()); !s.ok()) return s;
      for (size_t k = 0; k < flat.members.size(); ++k) variable(flat.members[k]).grad = flat.views[k];
    }
  }
  buckets_ = std::move(buckets);
  locations_ = std::move(locations);
  return absl::OkStatus();
}

std::vector<std::vector<size_t>> Reducer::bucket_assignment() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) {
    std::vector<size_t> params;
    for (size_t v : b.flat.members) params.push_back(variables_[v]);
    out.push_back(std::move(params));
  }
  return out;
}

absl::Status Reducer::register_comm_hook(std::unique_ptr<CommHook> hook) {
  if (hook == nullptr) return absl::InvalidArgumentError("register_comm_hook: hook is null");
  if (hook_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "register_comm_hook: hook '", hook_->name(), "' is already registered; a model "
        "takes one communication hook (tried to add '", hook->name(), "')"));
  }
  if (in_step_) {
    return absl::FailedPreconditionError(
        "register_comm_hook: cannot register a hook during backward");
  }
  hook_ = std::move(hook);
  stats_.hook = hook_->name();
  trace_site_ = "ddp:" + hook_->name();
  return absl::OkStatus();
}

absl::Status Reducer::save_hook_state(std::ostream& out) const {
  return hook_ ? hook_->save_state(out) : absl::OkStatus();
}

absl::Status Reducer::load_hook_state(std::istream& in) {
  return hook_ ? hook_->load_state(in) : absl::OkStatus();
}

void Reducer::set_join_enabled(bool enabled, bool throw_on_early_termination) {
  join_enabled_ = enabled;
  throw_on_early_termination_ = throw_on_early_termination;
}

absl::StatusOr<std::vector<int>> Reducer::exchange_active_ranks(bool active) {
  Tensor flags = Tensor::zeros({pg_->size()}, DType::kInt32);
  flags.data_as<int32_t>()[pg_->rank()] = active ? 1 : 0;
  absl::Status s = run_control_collective(
      flags, control_device(model_),
      [this](const Tensor& t) { return pg_->allreduce({t}); }, wait_timeout());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("join: exchanging active ranks: ", s.message()));
  }
  std::vector<int> active_ranks;
  for (int r = 0; r < pg_->size(); ++r) {
    if (flags.data_as<int32_t>()[r] != 0) active_ranks.push_back(r);
  }
  return active_ranks;
}

absl::StatusOr<size_t> Reducer::variable_of(size_t param_index, const char* what) const {
  if (param_index >= model_.num_parameters()) {
    return absl::OutOfRangeError(absl::StrCat(what, ": parameter index ", param_index,
                                              " out of range (the model has ",
                                              model_.num_parameters(), " parameters)"));
  }
  int v = variable_of_param_[param_index];
  if (v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": parameter '", model_.parameter(param_index).name, "' (index ", param_index,
        ") does not require grad"));
  }
  return static_cast<size_t>(v);
}

absl::Status Reducer::start_step() {
  step_syncs_ = require_grad_sync_;
  marked_.assign(variables_.size(), false);
  // A step that failed or was abandoned before the rebuild leaves a partial
  // ready order; record it afresh (else it never has every variable once).
  if (!rebuilt_ && step_syncs_) ready_order_.clear();
  next_to_launch_ = 0;
  unused_this_step_ = 0;
  active_ranks_ = pg_->size();
  step_start_ = std::chrono::steady_clock::now();
  if (step_syncs_ && join_enabled_) {
    absl::StatusOr<std::vector<int>> active = exchange_active_ranks(true);
    if (!active.ok()) return active.status();
    active_ranks_ = static_cast<int>(active->size());
    if (throw_on_early_termination_ && active_ranks_ < pg_->size()) {
      std::vector<int> joined;
      for (int r = 0, k = 0; r < pg_->size(); ++r) {
        if (k < active_ranks_ && (*active)[k] == r) { ++k; continue; }
        joined.push_back(r);
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", absl::StrJoin(joined, ", rank "),
          " ran out of inputs (joined) before this rank; throw_on_early_termination is set"));
    }
  }
  for (Bucket& b : buckets_) {
    b.pending = b.flat.members.size();
    b.result = nullptr;
    b.grad_bucket = nullptr;
  }
  payload_at_start_ = pg_->counters().payload_bytes.load();
  in_step_ = true;
  return absl::OkStatus();
}

absl::Status Reducer::prepare_for_backward(const std::vector<size_t>& unused_params) {
  if (in_step_) {
    return absl::FailedPreconditionError(
        "prepare_for_backward: the previous backward pass was not finalized "
        "(call finalize_backward() after every backward)");
  }
  if (!unused_params.empty() && !options_.find_unused_parameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepare_for_backward: ", unused_params.size(),
        " unused parameters given, but DDP was built without find_unused_parameters"));
  }
  std::vector<size_t> unused;
  for (size_t p : unused_params) {
    absl::StatusOr<size_t> v = variable_of(p, "prepare_for_backward");
    if (!v.ok()) return v.status();
    unused.push_back(*v);
  }
  if (absl::Status s = start_step(); !s.ok()) return s;
  for (size_t v : unused) {
    if (marked_[v]) continue;  // listed twice
    ++unused_this_step_;
    if (absl::Status s = mark_variable_ready(v); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Reducer::mark_ready(size_t param_index) {
  absl::StatusOr<size_t> v = variable_of(param_index, "mark_ready");
  if (!v.ok()) return v.status();
  if (!in_step_) {
    if (absl::Status s = start_step(); !s.ok()) return s;
  }
  if (marked_[*v]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mark_ready: parameter '", variable(*v).name, "' (index ", param_index,
        ") was marked ready twice in one backward pass"));
  }
  used_[*v] = true;
  return mark_variable_ready(*v);
}

absl::Status Reducer::mark_variable_ready(size_t v) {
  marked_[v] = true;
  if (!step_syncs_) return absl::OkStatus();  // no_sync: gradients stay local
  if (!rebuilt_) ready_order_.push_back(v);
  const Location& loc = locations_[v];
  Bucket& bucket = buckets_[loc.bucket];
  const Tensor& view = bucket.flat.views[loc.slot];
  Parameter& p = variable(v);
  const bool copies = !options_.gradient_as_bucket_view || p.grad.data() != view.data();
  if (divides_into_buckets(view)) {
    // No hook: average here, in the one pass that copies the gradient in
    // (or over the view itself); run_hook then only sums.
    if (absl::Status s = copy_divided(view, p.grad, pg_->size(), "mark_ready: parameter '" +
                                                                     p.name + "' gradient");
        !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
  } else if (copies) {
    // Copy mode, or the model replaced its view with a new tensor: take the
    // values, and in view mode restore the view.
    if (absl::Status s = view.copy_from(p.grad); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("mark_ready: parameter '", p.name,
                                                     "' gradient: ", s.message()));
    }
  }
  if (copies && options_.gradient_as_bucket_view) p.grad = view;
  if (--bucket.pending == 0) launch_ready_buckets();
  return absl::OkStatus();
}

std::shared_ptr<Future<Tensor>> Reducer::run_hook(GradBucket& bucket) {
  // The collectives the hook issues from here are recorded as this bucket's.
  const TraceSite site(trace_site_.c_str(), static_cast<int64_t>(bucket.index()),
                       static_cast<int64_t>(stats_.step));
  if (hook_ == nullptr) {
    if (!divides_into_buckets(bucket.buffer())) return allreduce_average(*pg_, bucket.buffer());
    // mark_variable_ready divided each gradient on its way in: sum.
    const Tensor buffer = bucket.buffer();
    return pg_->allreduce({buffer})->get_future()->then(
        [buffer](TensorList&) { return buffer; });
  }
  std::shared_ptr<Future<Tensor>> f = hook_->run(bucket);
  if (f == nullptr) {
    return Future<Tensor>::failed(absl::InternalError(
        absl::StrCat("hook '", hook_->name(), "' returned no future for bucket ", bucket.index())));
  }
  return f;
}

bool Reducer::divides_into_buckets(const Tensor& bucket) const {
  // A device bucket is averaged whole by allreduce_average (divided on the
  // device, then summed); a hook gets the local gradients and averages as
  // it chooses.
  return hook_ == nullptr && bucket.device().is_cpu() && pg_->size() > 1;
}

bool Reducer::serialize_launches() const {
  return hook_ != nullptr && hook_->issues_collectives_after_run() &&
         !options_.overlap_hook_launches;
}

std::unique_ptr<GradBucket> Reducer::make_grad_bucket(size_t b, const Tensor& buffer) {
  const FlatBucket& flat = buckets_[b].flat;
  std::vector<Tensor> params;
  for (size_t v : flat.members) params.push_back(variable(v).value);
  return std::make_unique<GradBucket>(b, b + 1 == buckets_.size(), buffer, flat.offsets,
                                      flat.shapes, std::move(params));
}

void Reducer::launch_bucket(size_t b) {
  Bucket& bucket = buckets_[b];
  bucket.grad_bucket = make_grad_bucket(b, bucket.flat.buffer);
  bucket.result = run_hook(*bucket.grad_bucket);
}

void Reducer::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the same collectives in
  // the same order whatever order its gradients arrive in. A hook that
  // issues collectives from its futures' callbacks (PowerSGD's Q after P),
  // on communication threads, could interleave them differently with the
  // next bucket's on different ranks, so for such a hook the next one
  // starts only once the previous bucket's future is complete.
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    if (serialize_launches() && next_to_launch_ > 0 &&
        !buckets_[next_to_launch_ - 1].result->is_completed()) {
      return;  // the next mark_ready or finalize_backward launches it
    }
    launch_bucket(next_to_launch_++);
  }
}

absl::Status Reducer::launch_remaining() {
  // Every gradient is in: launch what is left, each after its predecessor.
  while (next_to_launch_ < buckets_.size()) {
    if (serialize_launches() && next_to_launch_ > 0) {
      absl::Status s = buckets_[next_to_launch_ - 1].result->wait(wait_timeout());
      if (!s.ok()) return s;  // reported by wait_launched with the bucket
    }
    launch_bucket(next_to_launch_++);
  }
  return absl::OkStatus();
}

std::chrono::milliseconds Reducer::wait_timeout() const {
  // The backend fails ops after the group's timeout; this is only a backstop
  // against a hook whose future never completes.
  return pg_->timeout() + std::chrono::seconds(5);
}

absl::Status Reducer::wait_launched(double* waited_seconds) {
  auto start = std::chrono::steady_clock::now();
  absl::Status first_error;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b].result == nullptr) continue;
    absl::Status s = buckets_[b].result->wait(wait_timeout());
    if (!s.ok() && first_error.ok()) {
      first_error = absl::Status(s.code(), absl::StrCat(
          "bucket ", b, " (hook ", stats_.hook, "): ", s.message()));
    }
  }
  *waited_seconds = seconds_since(start);
  return first_error;
}

absl::Status Reducer::write_back() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    absl::StatusOr<Tensor> result = bucket.result->result();
    if (!result.ok()) return result.status();
    if (absl::Status s = check_same_layout(*result, bucket.flat.buffer,
                                           absl::StrCat("hook ", stats_.hook, " result for bucket ", b));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = bucket.flat.buffer.copy_from(*result); !s.ok()) return s;
    if (!options_.gradient_as_bucket_view) {
      // A parameter no rank used keeps its grad as it was (torch's rule).
      if (absl::Status s = copy_out_of_bucket(bucket.flat, variable_grads(), globally_used_);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Reducer::exchange_used(const std::vector<bool>& used) {
  // After every bucket completed: hooks issue collectives from their
  // futures' callbacks, and this one must come after them on every rank.
  const size_t n = variables_.size();
  Tensor counts = Tensor::zeros({std::max<int64_t>(static_cast<int64_t>(n), 1)}, DType::kInt32);
  for (size_t v = 0; v < n; ++v) counts.data_as<int32_t>()[v] = used[v] ? 1 : 0;
  absl::Status s = run_control_collective(
      counts, control_device(model_),
      [this](const Tensor& t) { return pg_->allreduce({t}); }, wait_timeout());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(
        "find_unused_parameters: exchanging which parameters each rank used: ", s.message()));
  }
  globally_unused_.clear();
  for (size_t v = 0; v < n; ++v) {
    globally_used_[v] = counts.data_as<int32_t>()[v] != 0;
    if (!globally_used_[v]) globally_unused_.push_back(variables_[v]);
  }
  return absl::OkStatus();
}

absl::Status Reducer::rebuild_buckets() {
  // Rank 0's ready order decides; -1 first means "rank 0 has none" (it joined
  // before syncing), and then nobody rebuilds yet.
  const int64_t n = static_cast<int64_t>(variables_.size());
  Tensor order = Tensor::zeros({std::max<int64_t>(n, 1)}, DType::kInt64);
  int64_t* o = order.data_as<int64_t>();
  if (pg_->rank() == 0) {
    if (static_cast<int64_t>(ready_order_.size()) == n && n > 0) {
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int64_t>(ready_order_[i]);
    } else {
      o[0] = -1;
    }
  }
  BroadcastOptions opts;
  opts.root_rank = 0;
  absl::Status s = run_control_collective(
      order, control_device(model_),
      [this, &opts](const Tensor& t) { return pg_->broadcast({t}, opts); }, wait_timeout());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rebuilding buckets: broadcasting rank 0's ready order: ", s.message()));
  }
  if (n == 0 || o[0] < 0) return absl::OkStatus();
  std::vector<size_t> new_order(n);
  for (int64_t i = 0; i < n; ++i) {
    if (o[i] < 0 || o[i] >= n) {
      return absl::InternalError(absl::StrCat("rebuilding buckets: rank 0 sent variable index ", o[i],
                                              " (expected 0..", n - 1, ")"));
    }
    new_order[i] = static_cast<size_t>(o[i]);
  }
  if (absl::Status s = build_buckets(new_order); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rebuilding buckets: ", s.message()));
  }
  rebuilt_ = true;
  rebuilt_order_ = new_order;
  ready_order_.clear();
  ready_order_.shrink_to_fit();
  return absl::OkStatus();
}

std::vector<size_t> Reducer::rebuilt_order() const {
  std::vector<size_t> out;
  for (size_t v : rebuilt_order_) out.push_back(variables_[v]);
  return out;
}

absl::Status Reducer::restore_rebuilt_order(const std::vector<size_t>& order) {
  if (order.empty()) return absl::OkStatus();
  if (in_step_) {
    return absl::FailedPreconditionError("restore_rebuilt_order: not during a backward pass");
  }
  if (order.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore_rebuilt_order: the saved bucket order has ", order.size(),
        " parameters, this model trains ", variables_.size()));
  }
  std::vector<size_t> variables;
  std::vector<bool> seen(variables_.size(), false);
  for (size_t p : order) {
    absl::StatusOr<size_t> v = variable_of(p, "restore_rebuilt_order");
    if (!v.ok()) return v.status();
    if (seen[*v]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore_rebuilt_order: parameter index ", p, " appears twice in the saved order"));
    }
    seen[*v] = true;
    variables.push_back(*v);
  }
  if (absl::Status s = build_buckets(variables); !s.ok()) return s;
  rebuilt_ = true;
  rebuilt_order_ = std::move(variables);
  ready_order_.clear();
  return absl::OkStatus();
}

void Reducer::end_step() {
  in_step_ = false;
  if (step_syncs_) used_.assign(used_.size(), false);
  for (Bucket& b : buckets_) {
    b.result = nullptr;
    b.grad_bucket = nullptr;
  }
}

absl::Status Reducer::finalize_backward() {
  if (!in_step_) {
    // No gradient at all this step (every parameter unused).
    if (absl::Status s = start_step(); !s.ok()) return s;
  }
  if (!step_syncs_) {
    end_step();
    return absl::OkStatus();
  }
  std::vector<size_t> unready;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t v : buckets_[b].flat.members) {
      if (!marked_[v]) unready.push_back(v);
    }
  }
  if (!unready.empty() && !options_.find_unused_parameters) {
    std::vector<std::string> names;
    for (size_t i = 0; i < unready.size() && i < kMaxNamesInError; ++i) {
      names.push_back(absl::StrCat("'", variable(unready[i]).name, "' (index ",
                                   variables_[unready[i]], ")"));
    }
    if (unready.size() > kMaxNamesInError) {
      names.push_back(absl::StrCat("and ", unready.size() - kMaxNamesInError, " more"));
    }
    double ignored = 0;
    wait_launched(&ignored).IgnoreError();
    end_step();
    return absl::FailedPreconditionError(absl::StrCat(
        "finalize_backward: parameters received no gradient in this backward pass: ",
        absl::StrJoin(names, ", "),
        ". Every trainable parameter must be marked ready on every rank, or build DDP with "
        "find_unused_parameters=true."));
  }
  for (size_t v : unready) {
    ++unused_this_step_;
    // Ready with its current local gradient: zero after zero_grad(), or what
    // no_sync steps accumulated (torch copies the grad if defined, else 0).
    if (absl::Status s = mark_variable_ready(v); !s.ok()) return s;
  }

  auto wait_start = std::chrono::steady_clock::now();
  launch_remaining().IgnoreError();
  double waited = 0;
  absl::Status status = wait_launched(&waited);
  waited = seconds_since(wait_start);
  uint64_t sent = pg_->counters().payload_bytes.load() - payload_at_start_;  // the buckets'
  if (status.ok() && options_.find_unused_parameters) status = exchange_used(used_);
  if (status.ok()) status = write_back();
  uint64_t grad_bytes = 0;
  for (const Bucket& b : buckets_) grad_bytes += b.flat.buffer.nbytes();
  end_step();
  if (!status.ok()) return status;

  stats_.step += 1;
  stats_.num_buckets = buckets_.size();
  stats_.gradient_bytes = grad_bytes;
  stats_.bytes_communicated = sent;
  stats_.compression_ratio = sent > 0 ? static_cast<double>(grad_bytes) / sent : 0.0;
  stats_.comm_wait_seconds = waited;
  stats_.unused_parameters = unused_this_step_;
  stats_.active_ranks = active_ranks_;
  stats_.buckets_rebuilt = false;
  if (!rebuilt_) {
    if (absl::Status s = rebuild_buckets(); !s.ok()) return s;
    stats_.buckets_rebuilt = rebuilt_;
  }
  stats_.step_seconds = seconds_since(step_start_);
  return absl::OkStatus();
}

void Reducer::abandon_step() {
  if (!in_step_) return;
  double ignored = 0;
  wait_launched(&ignored).IgnoreError();
  end_step();
}

absl::Status Reducer::shadow_step() {
  if (in_step_) {
    return absl::FailedPreconditionError("shadow_step: a backward pass is in progress");
  }
  // The same buckets, hook and order as the active ranks, with zeros: this
  // rank adds nothing to their sums but completes every collective.
  std::vector<std::unique_ptr<GradBucket>> shadows;
  std::vector<std::shared_ptr<Future<Tensor>>> results;
  absl::Status first_error;
  for (size_t b = 0; b < buckets_.size() && first_error.ok(); ++b) {
    if (serialize_launches() && b > 0) first_error = results[b - 1]->wait(wait_timeout());
    if (!first_error.ok()) break;
    const Tensor& buffer = buckets_[b].flat.buffer;
    absl::StatusOr<Tensor> zeros = Tensor::empty(buffer.shape(), buffer.dtype(), buffer.device());
    if (!zeros.ok()) return zeros.status();
    zeros->zero_();
    shadows.push_back(make_grad_bucket(b, *zeros));
    results.push_back(run_hook(*shadows.back()));
  }
  for (size_t b = 0; b < results.size(); ++b) {
    absl::Status s = results[b]->wait(wait_timeout());
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  if (first_error.ok() && options_.find_unused_parameters) {
    first_error = exchange_used(std::vector<bool>(variables_.size(), false));  // used nothing
  }
  if (!first_error.ok()) {
    return absl::Status(first_error.code(),
                        absl::StrCat("join: shadowing a step: ", first_error.message()));
  }
  if (!rebuilt_) return rebuild_buckets();
  return absl::OkStatus();
}

}  // namespace ddpx
