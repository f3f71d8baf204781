#include "hooks/powersgd_step.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/powersgd_random.h"

namespace ddpx {
namespace {

// Where a step keeps the bucket's error and P/Q memories: the host vectors
// (a CPU buffer; a checkpoint reads them as they are) or tensors beside the
// buffer (PowerSGDBucketMemory::device_*, a device buffer).
enum class MemoryPlace { kHost, kDevice };

// Everything one step's stages share; owned by the callbacks in flight.
struct StepContext {
  std::shared_ptr<ProcessGroup> pg;
  std::shared_ptr<PowerSGDState> state;
  PowerSGDStepInput in;
  DeviceKernels* k = nullptr;
  MemoryPlace place = MemoryPlace::kHost;
  Device device;
  PowerSGDBucketMemory* memory = nullptr;
  // M: the error with error feedback (it holds input + error until
  // decompression turns it into the new error), the buffer itself without.
  Tensor m;
  Tensor uncompressed;  // the uncompressed tensors back to back
  Tensor p, q;          // the bucket's P/Q memory, or this step's own
  std::vector<MatrixGroup> groups;
  float world_size = 1;
  std::shared_ptr<Future<Tensor>> result;

  // "PowerSGD bucket 3" (on the CPU) or "PowerSGD bucket 3 on cuda:0".
  std::string name() const {
    return device.is_cpu()
               ? absl::StrCat("PowerSGD bucket ", in.bucket_index)
               : absl::StrCat("PowerSGD bucket ", in.bucket_index, " on ", device.str());
  }
  absl::Status error(const std::string& what, const absl::Status& cause) const {
    return absl::Status(cause.code(), absl::StrCat(name(), ": ", what, ": ", cause.message()));
  }
  void fail(const std::string& what, const absl::Status& cause) {
    result->set_error(error(what, cause));
  }
};

using Ctx = std::shared_ptr<StepContext>;
using Stage = void (*)(const Ctx&);

#define DDPX_STEP_TRY(ctx, what, expr)                                \
  do {                                                                \
    absl::Status step_status_ = (expr);                               \
    if (!step_status_.ok()) return (ctx)->fail((what), step_status_); \
  } while (0)

// The group's factors as one [count, length, rank] batch (P: length = rows,
// Q: length = cols).
Tensor factor_batch(const Tensor& factors, const CompressionPlan& plan, const MatrixGroup& g,
                    bool is_p) {
  const CompressedMatrix& first = plan.matrices[g.first];
  const int64_t length = is_p ? first.rows : first.cols;
  return factors.view(is_p ? first.p_offset : first.q_offset, {g.count, length, first.rank});
}

// The group's matrices of `t` (laid out as the bucket) as [count, rows, cols].
Tensor group_matrices(const Tensor& t, const CompressionPlan& plan, const MatrixGroup& g) {
  const CompressedMatrix& first = plan.matrices[g.first];
  return t.view(first.offset, {g.count, first.rows, first.cols});
}

// Runs `fn(group)` for every group, stopping at the first error.
template <typename Fn>
absl::Status for_each_group(const StepContext& c, Fn fn) {
  for (const MatrixGroup& g : c.groups) {
    if (absl::Status s = fn(g); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Logs the all-zero columns (epsilon 0) where the kernels count them.
absl::Status orthogonalize_all(StepContext& c, bool is_p) {
  const float eps = c.state->options().orthogonalization_epsilon;
  int zero_columns = 0;
  for (const MatrixGroup& g : c.groups) {
    absl::StatusOr<int> zeros =
        c.k->orthogonalize_counting(factor_batch(is_p ? c.p : c.q, c.in.plan, g, is_p), eps);
    if (!zeros.ok()) return zeros.status();
    zero_columns += std::max(0, *zeros);
  }
  if (zero_columns > 0) {
    c.state->log(absl::StrCat(
        c.name(), ": ", zero_columns, " all-zero column(s) while orthogonalizing ",
        is_p ? "P" : "Q", "; they were set to 0. Set orthogonalization_epsilon (e.g. 1e-8)."));
  }
  return absl::OkStatus();
}

// Allreduces `data` (SUM) and, with `average`, divides by the world size;
// then runs `next`. On a float32 wire the allreduce works in place and
// divides after the sum (torch's order, bit for bit the float32 hook). On a
// 16-bit wire the values are divided first and narrowed into a wire tensor
// (one rounding), and the reduced sum is widened back into `data`.
void allreduce_then(const Ctx& ctx, const Tensor& data, const char* what, bool average,
                    Stage next) {
  // A group of one without a process group: the average over one rank is the
  // data itself (used to time PowerSGD's own work).
  if (!ctx->pg) return next(ctx);
  StepContext& c = *ctx;
  const bool narrow = c.in.wire_dtype != DType::kFloat32;
  Tensor wire = data;
  if (narrow) {
    absl::StatusOr<Tensor> cast = Tensor::empty({data.numel()}, c.in.wire_dtype, c.device);
    DDPX_STEP_TRY(ctx, absl::StrCat("allocating the wire for ", what), cast.status());
    DDPX_STEP_TRY(ctx, absl::StrCat("narrowing ", what),
                  c.k->cast_scaled(data, average ? c.world_size : 1.0f, *cast));
    wire = *cast;
  }
  if (c.in.counter) {
    c.in.counter->add_traffic(wire.nbytes(), allreduce_wire_bytes(wire.nbytes(), c.pg->size()));
  }
  auto future = c.pg->allreduce({wire})->get_future();
  future->add_callback([ctx, data, wire, what, average, narrow, next](Future<TensorList>& done) {
    StepContext& c = *ctx;
    DDPX_STEP_TRY(ctx, absl::StrCat("allreduce of ", what), done.status());
    const TensorList& out = done.value();
    const Tensor& reduced = out.empty() ? wire : out[0];
    if (narrow) {
      DDPX_STEP_TRY(ctx, absl::StrCat("widening ", what), c.k->cast(reduced, data));
    } else {
      if (reduced.data() != data.data()) {
        DDPX_STEP_TRY(ctx, absl::StrCat("copying ", what), c.k->copy(reduced, data));
      }
      if (average) {
        DDPX_STEP_TRY(ctx, absl::StrCat("dividing ", what), c.k->divide(data, c.world_size));
      }
    }
    next(ctx);
  });
}

void finish_step(const Ctx& ctx) {
  StepContext& c = *ctx;
  c.state->maybe_increase_iter(c.in.bucket_is_last);
  absl::StatusOr<Tensor> value = c.in.finish();
  // The bucket must hold its final values when the future completes.
  if (value.ok()) {
    if (absl::Status s = c.k->synchronize(c.device); !s.ok()) value = s;
  }
  c.result->set_result(std::move(value));
}

// Stage 5: M ~ P Q^T into the buffer; the error becomes M - P Q^T.
void decompress(const Ctx& ctx) {
  StepContext& c = *ctx;
  const bool error_feedback = c.state->options().use_error_feedback;
  const CompressionPlan& plan = c.in.plan;
  DDPX_STEP_TRY(ctx, "decompressing", for_each_group(c, [&](const MatrixGroup& g) {
                  return c.k->matmul_then_subtract(
                      factor_batch(c.p, plan, g, true), factor_batch(c.q, plan, g, false),
                      group_matrices(c.in.buffer, plan, g),
                      error_feedback ? group_matrices(c.m, plan, g) : Tensor());
                }));
  finish_step(ctx);
}

// Stage 4: orthogonalize the reduced Ps, Q = M^T P, allreduce the Qs.
void compute_qs(const Ctx& ctx) {
  StepContext& c = *ctx;
  const CompressionPlan& plan = c.in.plan;
  DDPX_STEP_TRY(ctx, "orthogonalizing P", orthogonalize_all(c, /*is_p=*/true));
  DDPX_STEP_TRY(ctx, "Q = M^T P", for_each_group(c, [&](const MatrixGroup& g) {
                  return c.k->matmul(group_matrices(c.m, plan, g), true,
                                     factor_batch(c.p, plan, g, true), false,
                                     factor_batch(c.q, plan, g, false));
                }));
  allreduce_then(ctx, c.q.view(0, {plan.q_numel}), "Qs", /*average=*/true, decompress);
}

// Stage 3: the averaged uncompressed tensors back into the buffer (and out
// of the error), then allreduce the Ps (or finish if nothing is compressed).
void unpack_uncompressed(const Ctx& ctx) {
  StepContext& c = *ctx;
  const CompressionPlan& plan = c.in.plan;
  const bool error_feedback = c.state->options().use_error_feedback;
  int64_t at = 0;
  for (const auto& [offset, numel] : plan.uncompressed) {
    if (numel == 0) continue;
    const Tensor dst = c.in.buffer.view(offset, {numel});
    DDPX_STEP_TRY(ctx, "unpacking the uncompressed tensors",
                  c.k->copy(c.uncompressed.view(at, {numel}), dst));
    if (error_feedback) {
      const Tensor e = c.m.view(offset, {numel});
      DDPX_STEP_TRY(ctx, "updating the error", c.k->add_scaled(e, -1.0f, dst, e));
    }
    at += numel;
  }
  if (plan.p_numel == 0) return finish_step(ctx);
  allreduce_then(ctx, c.p.view(0, {plan.p_numel}), "Ps", /*average=*/false, compute_qs);
}

// The (offset, numel) ranges of [0, n) that no compressed matrix covers:
// where error feedback's M = input + error is not fused into P = M Q.
std::vector<std::pair<int64_t, int64_t>> uncompressed_ranges_outside(
    const CompressionPlan& plan, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> covered;
  for (const CompressedMatrix& mat : plan.matrices) {
    covered.emplace_back(mat.offset, mat.rows * mat.cols);
  }
  std::sort(covered.begin(), covered.end());
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t at = 0;
  for (const auto& [offset, numel] : covered) {
    if (offset > at) gaps.emplace_back(at, offset - at);
    at = std::max(at, offset + numel);
  }
  if (n > at) gaps.emplace_back(at, n - at);
  return gaps;
}

int64_t remembered_numel(const std::vector<float>& host, const Tensor& device) {
  return device.defined() ? device.numel() : static_cast<int64_t>(host.size());
}

// One of the bucket's memories (`host`, or `device` beside the buffer) as
// a tensor of `numel` elements where the step runs, `fresh` ones zeroed.
// On the device an existing tensor is kept, else the host vector (a loaded
// checkpoint, or a bucket that moved from the CPU) is uploaded and then
// released: the device copy holds the truth.
absl::StatusOr<Tensor> memory(StepContext& c, std::vector<float>& host, Tensor& device,
                              int64_t numel, bool fresh) {
  if (c.place == MemoryPlace::kHost) {
    if (fresh || static_cast<int64_t>(host.size()) != numel) {
      host.assign(static_cast<size_t>(numel), 0.0f);
    }
    return Tensor::from_blob(host.data(), {numel}, DType::kFloat32);
  }
  if (device.defined() && !fresh) return device;
  absl::StatusOr<Tensor> t = Tensor::empty({numel}, DType::kFloat32, c.device);
  if (!t.ok()) return t.status();
  if (!fresh && !host.empty()) {
    Tensor staged = Tensor::from_blob(host.data(), {numel}, DType::kFloat32);
    if (absl::Status s = t->copy_from(staged); !s.ok()) return s;
  } else if (absl::Status s = c.k->fill(*t, 0.0f); !s.ok()) {
    return s;
  }
  host.clear();
  host.shrink_to_fit();
  device = *t;
  return device;
}

// Stages 1-2 on the caller's thread. Returns an error instead of starting
// when the bucket does not fit what this state remembers for it.
absl::Status prepare(StepContext& c) {
  const CompressionPlan& plan = c.in.plan;
  const PowerSGDOptions& options = c.state->options();
  const int64_t n = c.in.buffer.numel();
  PowerSGDBucketMemory& mem = *c.memory;
  // Check what the state remembers before changing any of it.
  const bool on_host = c.place == MemoryPlace::kHost;
  const int64_t error_numel =
      on_host ? static_cast<int64_t>(mem.error.size()) : remembered_numel(mem.error, mem.device_error);
  if (options.use_error_feedback && error_numel != 0 && error_numel != n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " has ", n,
        " elements but its remembered error has ", error_numel,
        " (did buckets change after start_powerSGD_iter?)"));
  }
  const int64_t p_numel =
      on_host ? static_cast<int64_t>(mem.p_memory.size()) : remembered_numel(mem.p_memory, mem.device_p_memory);
  const int64_t q_numel =
      on_host ? static_cast<int64_t>(mem.q_memory.size()) : remembered_numel(mem.q_memory, mem.device_q_memory);
  if (options.warm_start && mem.low_rank_initialized &&
      (p_numel != plan.p_numel || q_numel != plan.q_numel)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " needs P/Q memory of ", plan.p_numel, "/",
        plan.q_numel, " elements but remembers ", p_numel, "/", q_numel));
  }
  c.groups = matrix_groups(plan);
  c.m = c.in.buffer;
  if (options.use_error_feedback) {
    // M = input + error, in the error buffer (the input stays untouched
    // until results are written, so no copy of it is needed). The addition
    // is fused into P = M Q for the matrices, done apart for the rest.
    absl::StatusOr<Tensor> error = memory(c, mem.error, mem.device_error, n, /*fresh=*/false);
    if (!error.ok()) return c.error("error memory", error.status());
    c.m = *error;
  }

  // Qs from warm-start memory, or new ones: the same seed on every rank, a
  // new one at every initialization (drawn also when nothing is compressed,
  // as torch does, so later seeds do not depend on that).
  const bool randomize = !options.warm_start || !mem.low_rank_initialized;
  if (plan.p_numel == 0) {
    // Nothing to remember, but the memory counts as set up.
    if (options.warm_start && on_host) {
      mem.p_memory.clear();
      mem.q_memory.clear();
    }
  } else if (options.warm_start) {
    absl::StatusOr<Tensor> p =
        memory(c, mem.p_memory, mem.device_p_memory, plan.p_numel, /*fresh=*/randomize);
    if (!p.ok()) return c.error("P memory", p.status());
    absl::StatusOr<Tensor> q =
        memory(c, mem.q_memory, mem.device_q_memory, plan.q_numel, /*fresh=*/randomize);
    if (!q.ok()) return c.error("Q memory", q.status());
    c.p = *p;
    c.q = *q;
  } else {
    absl::StatusOr<Tensor> p = Tensor::empty({plan.p_numel}, DType::kFloat32, c.device);
    if (!p.ok()) return c.error("P", p.status());
    absl::StatusOr<Tensor> q = Tensor::empty({plan.q_numel}, DType::kFloat32, c.device);
    if (!q.ok()) return c.error("Q", q.status());
    c.p = *p;
    c.q = *q;
  }
  if (options.warm_start) mem.low_rank_initialized = true;
  if (randomize) {
    // Drawn on the host from the state's generator (the same values on
    // every rank and on either path), straight into a CPU Q, else copied.
    const uint64_t seed = c.state->next_random_seed();
    if (plan.q_numel == 0) {
      // (drawn all the same, as torch does)
    } else if (c.q.device().is_cpu()) {
      fill_standard_normal(c.q.data_as<float>(), plan.q_numel, seed);
    } else {
      Tensor fresh = Tensor::zeros({plan.q_numel}, DType::kFloat32);
      fill_standard_normal(fresh.data_as<float>(), plan.q_numel, seed);
      if (absl::Status s = c.q.copy_from(fresh); !s.ok()) return c.error("drawing Q", s);
    }
  }
  if (absl::Status s = orthogonalize_all(c, /*is_p=*/false); !s.ok()) {
    return c.error("orthogonalizing Q", s);
  }
  absl::Status s = for_each_group(c, [&](const MatrixGroup& g) {
    const Tensor m = group_matrices(c.m, plan, g);
    const Tensor q = factor_batch(c.q, plan, g, false);
    const Tensor p = factor_batch(c.p, plan, g, true);
    if (!options.use_error_feedback) return c.k->matmul(m, false, q, false, p);
    return c.k->add_then_matmul(m, group_matrices(c.in.buffer, plan, g), q, p);
  });
  if (!s.ok()) return c.error("P = M Q", s);
  if (options.use_error_feedback) {
    for (const auto& [offset, numel] : uncompressed_ranges_outside(plan, n)) {
      const Tensor m = c.m.view(offset, {numel});
      if (absl::Status s = c.k->add_scaled(m, 1.0f, c.in.buffer.view(offset, {numel}), m);
          !s.ok()) {
        return c.error("error feedback", s);
      }
    }
  }

  if (plan.uncompressed_numel == 0) return absl::OkStatus();
  absl::StatusOr<Tensor> packed =
      Tensor::empty({plan.uncompressed_numel}, DType::kFloat32, c.device);
  if (!packed.ok()) return c.error("packing the uncompressed tensors", packed.status());
  c.uncompressed = *packed;
  int64_t at = 0;
  for (const auto& [offset, numel] : plan.uncompressed) {
    if (numel == 0) continue;
    if (absl::Status s = c.k->copy(c.m.view(offset, {numel}), c.uncompressed.view(at, {numel}));
        !s.ok()) {
      return c.error("packing the uncompressed tensors", s);
    }
    at += numel;
  }
  return absl::OkStatus();
}

bool is_wire_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

}  // namespace

std::shared_ptr<Future<Tensor>> run_powersgd_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDStepInput input) {
  if (!input.buffer.defined() || input.buffer.dtype() != DType::kFloat32 ||
      !is_wire_dtype(input.wire_dtype)) {
    return Future<Tensor>::failed(absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD bucket ", input.bucket_index,
        ": a step works on a float32 buffer with a float32, float16 or bfloat16 wire, got ",
        input.buffer.defined() ? input.buffer.str() : "an undefined buffer", " and a ",
        dtype_name(input.wire_dtype), " wire")));
  }
  DeviceKernels* k = input.kernels;
  if (k == nullptr) {
    absl::StatusOr<DeviceKernels*> found =
        kernels_for(input.buffer, absl::StrCat("PowerSGD bucket ", input.bucket_index));
    if (!found.ok()) return Future<Tensor>::failed(found.status());
    k = *found;
  }
  const bool on_host = input.buffer.device().is_cpu() &&
                       input.memories == PowerSGDMemories::kWhereTheBufferIs;

  auto ctx = std::make_shared<StepContext>();
  ctx->result = Future<Tensor>::create();
  ctx->world_size = pg ? static_cast<float>(pg->size()) : 1.0f;
  ctx->memory = &state->bucket_memory(input.bucket_index);
  state->record_compression(input.plan.numel_before, input.plan.numel_after,
                            input.bucket_is_last);
  ctx->k = k;
  ctx->place = on_host ? MemoryPlace::kHost : MemoryPlace::kDevice;
  ctx->device = input.buffer.device();
  ctx->pg = std::move(pg);
  ctx->state = std::move(state);
  ctx->in = std::move(input);
  ctx->in.buffer = ctx->in.buffer.flatten();
  absl::Status prepared = prepare(*ctx);
  if (!prepared.ok()) {
    ctx->result->set_error(prepared);
    return ctx->result;
  }
  auto result = ctx->result;
  if (ctx->in.plan.uncompressed_numel > 0) {
    allreduce_then(ctx, ctx->uncompressed, "uncompressed tensors", /*average=*/true,
                   unpack_uncompressed);
  } else {
    unpack_uncompressed(ctx);
  }
  return result;
}

}  // namespace ddpx
