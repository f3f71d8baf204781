#include "hooks/powersgd_step.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/kernels/cpu_kernels.h"
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

  void fail(const std::string& what, const absl::Status& cause) {
    result->set_error(absl::Status(
        cause.code(), absl::StrCat("PowerSGD bucket ", in.bucket_index, ": ",
                                   what, ": ", cause.message())));
  }
};

using Stage = void (*)(const std::shared_ptr<StepContext>&);

// Narrows float32 values into a float16/bfloat16 tensor, dividing each by
// `divisor` in float32 first (one rounding, through the vectorized casts).
void narrow_into(const float* src, const Tensor& dst, float divisor) {
  auto* bits = static_cast<uint16_t*>(dst.data());
  if (dst.dtype() == DType::kFloat16) {
    kernels::float_to_half(src, bits, dst.numel(), divisor);
  } else {
    kernels::float_to_bfloat16(src, bits, dst.numel(), divisor);
  }
}

// Allreduces data[0..numel) (SUM) and, with `average`, divides by the world
// size; then runs `next`. On a float32 wire the allreduce works in place and
// divides after the sum (torch's order, bit for bit the float32 hook). On a
// 16-bit wire the values are divided first, narrowed into a wire tensor, and
// the reduced sum is widened back into `data`.
void allreduce_then(const std::shared_ptr<StepContext>& ctx, float* data,
                    int64_t numel, const char* what, bool average, Stage next) {
  // A group of one without a process group: the average over one rank is the
  // data itself (used to time PowerSGD's own work).
  if (!ctx->pg) return next(ctx);
  const bool narrow = ctx->in.wire_dtype != DType::kFloat32;
  Tensor wire;
  if (narrow) {
    wire = Tensor::zeros({numel}, ctx->in.wire_dtype);
    narrow_into(data, wire, average ? ctx->world_size : 1.0f);
  } else {
    wire = Tensor::from_blob(data, {numel}, DType::kFloat32);
  }
  if (ctx->in.counter) {
    ctx->in.counter->add_traffic(wire.nbytes(),
                                 allreduce_wire_bytes(wire.nbytes(), ctx->pg->size()));
  }
  auto future = ctx->pg->allreduce({wire})->get_future();
  future->add_callback([ctx, wire, data, numel, what, average, narrow,
                        next](Future<TensorList>& done) {
    absl::Status s = done.status();
    if (!s.ok()) return ctx->fail(absl::StrCat("allreduce of ", what), s);
    const TensorList& out = done.value();
    const Tensor& reduced = out.empty() ? wire : out[0];
    if (narrow) {
      s = widen_into(reduced, data, "PowerSGD");
    } else if (reduced.data() != wire.data()) {
      s = wire.copy_from(reduced);
    }
    if (!s.ok()) return ctx->fail(absl::StrCat("allreduce of ", what), s);
    if (average && !narrow) divide_inplace(data, ctx->world_size, numel);
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
  ctx->result->set_result(ctx->in.finish());
}

// Stage 5: M ~ P Q^T into the buffer; the error becomes M - P Q^T.
void decompress(const std::shared_ptr<StepContext>& ctx) {
  StepContext& c = *ctx;
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
  allreduce_then(ctx, c.q, c.in.plan.q_numel, "Qs", /*average=*/true, decompress);
}

// Stage 3: the uncompressed tensors are averaged: copy them back into the
// buffer, then allreduce the Ps (or finish if nothing is compressed).
void unpack_uncompressed(const std::shared_ptr<StepContext>& ctx) {
  StepContext& c = *ctx;
  const CompressionPlan& plan = c.in.plan;
  if (plan.uncompressed_numel > 0) {
    const float* reduced = c.uncompressed.data_as<float>();
    const bool error_feedback = c.state->options().use_error_feedback;
    int64_t at = 0;
    for (const auto& [offset, numel] : plan.uncompressed) {
      std::copy(reduced + at, reduced + at + numel, c.work + offset);
      if (error_feedback) subtract_inplace(c.m + offset, c.work + offset, numel);
      at += numel;
    }
  }
  if (plan.p_numel == 0) return finish_step(ctx);
  allreduce_then(ctx, c.p, plan.p_numel, "Ps", /*average=*/false, compute_qs);
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
    // The error buffer becomes M = input + error (below, fused into P = M Q
    // for the matrices); the input stays untouched until results are
    // written, so no copy of it is needed.
    c.m = error.data();
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
    if (options.use_error_feedback) {
      // One pass: error += input and P = M Q on each row while it is in cache.
      add_then_matmul_m_q(c.m + mat.offset, c.work + mat.offset, mat.rows, mat.cols,
                          c.q + mat.q_offset, mat.rank, c.p + mat.p_offset);
    } else {
      matmul_m_q(c.m + mat.offset, mat.rows, mat.cols, c.q + mat.q_offset,
                 mat.rank, c.p + mat.p_offset);
    }
  }
  if (options.use_error_feedback) {
    for (const auto& [offset, numel] : uncompressed_ranges_outside(plan, n)) {
      add_inplace(c.m + offset, c.work + offset, numel);
    }
  }

  c.uncompressed = Tensor::zeros({plan.uncompressed_numel}, DType::kFloat32);
  float* packed = c.uncompressed.data_as<float>();
  for (const auto& [offset, numel] : plan.uncompressed) {
    std::copy(c.m + offset, c.m + offset + numel, packed);
    packed += numel;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_powersgd_bucket(const Tensor& buffer, const std::string& what) {
  const DType d = buffer.dtype();
  if (buffer.defined() && buffer.device().is_cpu() &&
      (d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": needs a float32, float16 or bfloat16 CPU bucket, got ",
      buffer.defined() ? buffer.str() : "an undefined buffer"));
}

absl::Status widen_into(const Tensor& src, float* dst, const std::string& what) {
  if (absl::Status s = check_powersgd_bucket(src, what); !s.ok()) return s;
  const auto* bits = static_cast<const uint16_t*>(src.data());
  switch (src.dtype()) {
    case DType::kFloat16:
      kernels::half_to_float(bits, dst, src.numel());
      break;
    case DType::kBFloat16:
      kernels::bfloat16_to_float(bits, dst, src.numel());
      break;
    default: {
      const float* values = src.data_as<float>();
      std::copy(values, values + src.numel(), dst);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> float32_work_buffer(const Tensor& bucket_buffer,
                                           const std::string& what) {
  if (absl::Status s = check_powersgd_bucket(bucket_buffer, what); !s.ok()) return s;
  if (bucket_buffer.dtype() == DType::kFloat32) return bucket_buffer;
  Tensor work = Tensor::zeros({bucket_buffer.numel()}, DType::kFloat32);
  if (absl::Status s = widen_into(bucket_buffer, work.data_as<float>(), what); !s.ok()) {
    return s;
  }
  return work;
}

void store_result(const float* src, const Tensor& dst) {
  if (dst.dtype() != DType::kFloat32) return narrow_into(src, dst, 1.0f);
  float* out = dst.data_as<float>();
  if (out != src) std::copy(src, src + dst.numel(), out);
}

std::shared_ptr<Future<Tensor>> run_powersgd_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDStepInput input) {
  auto ctx = std::make_shared<StepContext>();
  ctx->result = Future<Tensor>::create();
  const DType wire = input.wire_dtype;
  if (!input.buffer.device().is_cpu() ||
      input.buffer.dtype() != DType::kFloat32 ||
      (wire != DType::kFloat32 && wire != DType::kFloat16 && wire != DType::kBFloat16)) {
    ctx->result->set_error(absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD bucket ", input.bucket_index,
        ": a step works on a float32 CPU buffer with a float32, float16 or "
        "bfloat16 wire, got ", input.buffer.str(), " and a ", dtype_name(wire),
        " wire")));
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
    allreduce_then(ctx, ctx->uncompressed.data_as<float>(),
                   ctx->in.plan.uncompressed_numel, "uncompressed tensors",
                   /*average=*/true, unpack_uncompressed);
  } else {
    unpack_uncompressed(ctx);
  }
  return result;
}

}  // namespace ddpx
