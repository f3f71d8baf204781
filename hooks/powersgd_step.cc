#include "hooks/powersgd_step.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_orthogonalize.h"
#include "hooks/powersgd_random.h"

namespace ddpx {
namespace {

// Everything one step's stages share; owned by the callbacks in flight.
struct StepContext {
  std::shared_ptr<ProcessGroup> pg;
  std::shared_ptr<PowerSGDState> state;
  PowerSGDStepInput in;
  PowerSGDBucketMemory* memory = nullptr;
  float* work = nullptr;
  // Where M lives during the step: the error buffer with error feedback
  // (it holds input + error until the final pass turns it into the new
  // error), the bucket buffer itself without.
  float* m = nullptr;
  Tensor uncompressed;
  // P/Q storage when warm start is off (with it, the bucket's memory).
  std::vector<float> local_p, local_q;
  float* p = nullptr;
  float* q = nullptr;
  float world_size = 1;
  std::shared_ptr<Future<Tensor>> result;

  // Drops this step's process-group reference before completing: whoever
  // waits on the result may then destroy the group, and its last reference
  // must not die on the group's own worker thread.
  void fail(const std::string& what, const absl::Status& cause) {
    pg.reset();
    result->set_error(absl::Status(
        cause.code(), absl::StrCat("PowerSGD bucket ", in.bucket_index, ": ",
                                   what, ": ", cause.message())));
  }
};

using Stage = void (*)(const std::shared_ptr<StepContext>&);

// Allreduces `tensor` (SUM, in place) and runs `next` when it completes.
void allreduce_then(const std::shared_ptr<StepContext>& ctx, Tensor tensor,
                    const char* what, Stage next) {
  // A group of one without a process group: the sum over one rank is the
  // tensor itself (used to time PowerSGD's own work).
  if (!ctx->pg) return next(ctx);
  if (ctx->in.counter) {
    ctx->in.counter->add_traffic(tensor.nbytes(),
                                 allreduce_wire_bytes(tensor.nbytes(), ctx->pg->size()));
  }
  auto future = ctx->pg->allreduce({tensor})->get_future();
  future->add_callback([ctx, tensor, what, next](Future<TensorList>& done) {
    absl::Status s = done.status();
    if (!s.ok()) return ctx->fail(absl::StrCat("allreduce of ", what), s);
    const TensorList& out = done.value();
    if (!out.empty() && out[0].data() != tensor.data()) {
      s = tensor.copy_from(out[0]);
      if (!s.ok()) return ctx->fail(absl::StrCat("allreduce of ", what), s);
    }
    next(ctx);
  });
}

void orthogonalize_all(StepContext& ctx, bool factor_is_p) {
  int zero_columns = 0;
  for (const CompressedMatrix& mat : ctx.in.plan.matrices) {
    float* factor = factor_is_p ? ctx.p + mat.p_offset : ctx.q + mat.q_offset;
    const int64_t length = factor_is_p ? mat.rows : mat.cols;
    zero_columns += orthogonalize_columns(
        factor, length, mat.rank, ctx.state->options().orthogonalization_epsilon);
  }
  if (zero_columns > 0) {
    ctx.state->log(absl::StrCat(
        "PowerSGD bucket ", ctx.in.bucket_index, ": ", zero_columns,
        " all-zero column(s) while orthogonalizing ", factor_is_p ? "P" : "Q",
        "; they were set to 0. Set orthogonalization_epsilon (e.g. 1e-8)."));
  }
}

void finish_step(const std::shared_ptr<StepContext>& ctx) {
  ctx->state->maybe_increase_iter(ctx->in.bucket_is_last);
  ctx->pg.reset();  // see StepContext::fail
  ctx->result->set_result(ctx->in.finish());
}

// Stage 5: M ~ P Q^T into the buffer; the error becomes M - P Q^T.
void decompress(const std::shared_ptr<StepContext>& ctx) {
  StepContext& c = *ctx;
  divide_inplace(c.q, c.world_size, c.in.plan.q_numel);
  const bool error_feedback = c.state->options().use_error_feedback;
  for (const CompressedMatrix& mat : c.in.plan.matrices) {
    float* out = c.work + mat.offset;
    decompress_p_qt(c.p + mat.p_offset, c.q + mat.q_offset, mat.rows, mat.cols,
                    mat.rank, out, error_feedback ? c.m + mat.offset : nullptr);
  }
  finish_step(ctx);
}

// Stage 4: orthogonalize the reduced Ps, Q = M^T P, allreduce the Qs.
void compute_qs(const std::shared_ptr<StepContext>& ctx) {
  StepContext& c = *ctx;
  orthogonalize_all(c, /*factor_is_p=*/true);
  for (const CompressedMatrix& mat : c.in.plan.matrices) {
    matmul_mt_p(c.m + mat.offset, mat.rows, mat.cols, c.p + mat.p_offset,
                mat.rank, c.q + mat.q_offset);
  }
  Tensor qs = Tensor::from_blob(c.q, {c.in.plan.q_numel}, DType::kFloat32);
  allreduce_then(ctx, qs, "Qs", decompress);
}

// Stage 3: the uncompressed tensors are reduced: average them back into the
// buffer, then allreduce the Ps (or finish if nothing is compressed).
void unpack_uncompressed(const std::shared_ptr<StepContext>& ctx) {
  StepContext& c = *ctx;
  const CompressionPlan& plan = c.in.plan;
  if (plan.uncompressed_numel > 0) {
    float* reduced = c.uncompressed.data_as<float>();
    divide_inplace(reduced, c.world_size, plan.uncompressed_numel);
    const bool error_feedback = c.state->options().use_error_feedback;
    int64_t at = 0;
    for (const auto& [offset, numel] : plan.uncompressed) {
      std::copy(reduced + at, reduced + at + numel, c.work + offset);
      if (error_feedback) subtract_inplace(c.m + offset, c.work + offset, numel);
      at += numel;
    }
  }
  if (plan.p_numel == 0) return finish_step(ctx);
  Tensor ps = Tensor::from_blob(c.p, {plan.p_numel}, DType::kFloat32);
  allreduce_then(ctx, ps, "Ps", compute_qs);
}

// Stages 1-2 on the caller's thread. Returns an error instead of starting
// when the bucket does not fit what this state remembers for it.
absl::Status prepare(StepContext& c) {
  const CompressionPlan& plan = c.in.plan;
  const PowerSGDOptions& options = c.state->options();
  const int64_t n = c.in.buffer.numel();
  c.work = c.in.buffer.data_as<float>();
  c.m = c.work;
  // Check what the state remembers before changing any of it.
  const PowerSGDBucketMemory& remembered = *c.memory;
  if (options.use_error_feedback && !remembered.error.empty() &&
      static_cast<int64_t>(remembered.error.size()) != n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " has ", n,
        " elements but its remembered error has ", remembered.error.size(),
        " (did buckets change after start_powerSGD_iter?)"));
  }
  if (options.warm_start && remembered.low_rank_initialized &&
      (static_cast<int64_t>(remembered.p_memory.size()) != plan.p_numel ||
       static_cast<int64_t>(remembered.q_memory.size()) != plan.q_numel)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " needs P/Q memory of ",
        plan.p_numel, "/", plan.q_numel, " elements but remembers ",
        remembered.p_memory.size(), "/", remembered.q_memory.size()));
  }
  if (options.use_error_feedback) {
    std::vector<float>& error = c.memory->error;
    if (error.empty()) error.assign(static_cast<size_t>(n), 0.0f);
    // The error buffer becomes M = input + error; the input stays untouched
    // until results are written, so no copy of it is needed.
    add_inplace(error.data(), c.work, n);
    c.m = error.data();
  }

  c.uncompressed = Tensor::zeros({plan.uncompressed_numel}, DType::kFloat32);
  float* packed = c.uncompressed.data_as<float>();
  for (const auto& [offset, numel] : plan.uncompressed) {
    std::copy(c.m + offset, c.m + offset + numel, packed);
    packed += numel;
  }

  bool randomize = true;
  if (options.warm_start) {
    PowerSGDBucketMemory& mem = *c.memory;
    if (mem.low_rank_initialized) {
      randomize = false;
    } else {
      mem.p_memory.assign(static_cast<size_t>(plan.p_numel), 0.0f);
      mem.q_memory.assign(static_cast<size_t>(plan.q_numel), 0.0f);
      mem.low_rank_initialized = true;
    }
    c.p = mem.p_memory.data();
    c.q = mem.q_memory.data();
  } else {
    c.local_p.assign(static_cast<size_t>(plan.p_numel), 0.0f);
    c.local_q.assign(static_cast<size_t>(plan.q_numel), 0.0f);
    c.p = c.local_p.data();
    c.q = c.local_q.data();
  }
  // The same seed on every rank, a new one at every initialization.
  if (randomize) fill_standard_normal(c.q, plan.q_numel, c.state->next_random_seed());
  orthogonalize_all(c, /*factor_is_p=*/false);
  for (const CompressedMatrix& mat : plan.matrices) {
    matmul_m_q(c.m + mat.offset, mat.rows, mat.cols, c.q + mat.q_offset,
               mat.rank, c.p + mat.p_offset);
  }
  return absl::OkStatus();
}

}  // namespace

std::shared_ptr<Future<Tensor>> run_powersgd_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDStepInput input) {
  auto ctx = std::make_shared<StepContext>();
  ctx->result = Future<Tensor>::create();
  if (!input.buffer.device().is_cpu() ||
      input.buffer.dtype() != DType::kFloat32) {
    ctx->result->set_error(absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD bucket ", input.bucket_index,
        ": the CPU hook needs a float32 CPU buffer, got ", input.buffer.str())));
    return ctx->result;
  }
  ctx->world_size = pg ? static_cast<float>(pg->size()) : 1.0f;
  ctx->memory = &state->bucket_memory(input.bucket_index);
  state->record_compression(input.plan.numel_before, input.plan.numel_after,
                            input.bucket_is_last);
  ctx->pg = std::move(pg);
  ctx->state = std::move(state);
  ctx->in = std::move(input);
  absl::Status prepared = prepare(*ctx);
  if (!prepared.ok()) {
    ctx->result->set_error(prepared);
    return ctx->result;
  }
  auto result = ctx->result;
  if (ctx->in.plan.uncompressed_numel > 0) {
    allreduce_then(ctx, ctx->uncompressed, "uncompressed tensors",
                   unpack_uncompressed);
  } else {
    unpack_uncompressed(ctx);
  }
  return result;
}

}  // namespace ddpx
