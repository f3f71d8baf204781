#include "hooks/powersgd_device_step.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/powersgd_random.h"

namespace ddpx {
namespace {

struct DeviceStepContext {
  std::shared_ptr<ProcessGroup> pg;
  std::shared_ptr<PowerSGDState> state;
  PowerSGDDeviceStepInput in;
  PowerSGDBucketMemory* memory = nullptr;
  DeviceKernels* k = nullptr;
  Device device;
  // M: the device error (it holds input + error until decompression turns
  // it into the new error) with error feedback, `work` itself without.
  Tensor m;
  Tensor uncompressed;
  Tensor p, q;  // the bucket's device P/Q memory, or this step's own
  std::vector<MatrixGroup> groups;
  float world_size = 1;
  std::shared_ptr<Future<Tensor>> result;

  void fail(const std::string& what, const absl::Status& cause) {
    result->set_error(absl::Status(
        cause.code(), absl::StrCat("PowerSGD bucket ", in.bucket_index, " on ",
                                   device.str(), ": ", what, ": ", cause.message())));
  }
};

using Ctx = std::shared_ptr<DeviceStepContext>;
using Stage = void (*)(const Ctx&);

#define DDPX_STEP_TRY(ctx, what, expr)                  \
  do {                                                  \
    absl::Status step_status_ = (expr);                 \
    if (!step_status_.ok()) return (ctx)->fail((what), step_status_); \
  } while (0)

absl::StatusOr<Tensor> device_tensor(int64_t numel, DType dtype, Device device) {
  return Tensor::empty({numel}, dtype, device);
}

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
absl::Status for_each_group(const DeviceStepContext& c, Fn fn) {
  for (const MatrixGroup& g : c.groups) {
    if (absl::Status s = fn(g); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status orthogonalize_all(DeviceStepContext& c, bool is_p) {
  const float eps = c.state->options().orthogonalization_epsilon;
  for (const MatrixGroup& g : c.groups) {
    const Tensor& factors = is_p ? c.p : c.q;
    if (absl::Status s = c.k->orthogonalize(factor_batch(factors, c.in.plan, g, is_p), eps);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// As powersgd_step.cc's allreduce_then, on device tensors: a float32 wire
// is reduced in place and divided after the sum (the CPU order); a 16-bit
// wire gets a float32 copy divided first, cast down, and the sum cast back
// into `data`.
void allreduce_then(const Ctx& ctx, const Tensor& data, const char* what, bool average,
                    Stage next) {
  if (!ctx->pg) return next(ctx);
  DeviceStepContext& c = *ctx;
  const bool narrow = c.in.wire_dtype != DType::kFloat32;
  Tensor wire = data;
  if (narrow) {
    absl::StatusOr<Tensor> scaled = device_tensor(data.numel(), DType::kFloat32, c.device);
    absl::StatusOr<Tensor> cast = device_tensor(data.numel(), c.in.wire_dtype, c.device);
    DDPX_STEP_TRY(ctx, absl::StrCat("allocating the wire for ", what),
                  scaled.ok() ? cast.status() : scaled.status());
    DDPX_STEP_TRY(ctx, absl::StrCat("narrowing ", what), c.k->copy(data, *scaled));
    if (average) DDPX_STEP_TRY(ctx, absl::StrCat("dividing ", what), c.k->divide(*scaled, c.world_size));
    DDPX_STEP_TRY(ctx, absl::StrCat("narrowing ", what), c.k->cast(*scaled, *cast));
    wire = *cast;
  }
  if (c.in.counter) {
    c.in.counter->add_traffic(wire.nbytes(), allreduce_wire_bytes(wire.nbytes(), c.pg->size()));
  }
  auto future = c.pg->allreduce({wire})->get_future();
  future->add_callback([ctx, data, wire, what, average, narrow, next](Future<TensorList>& done) {
    DeviceStepContext& c = *ctx;
    DDPX_STEP_TRY(ctx, absl::StrCat("allreduce of ", what), done.status());
    const TensorList& out = done.value();
    const Tensor& reduced = out.empty() ? wire : out[0];
    if (narrow) {
      DDPX_STEP_TRY(ctx, absl::StrCat("widening ", what), c.k->cast(reduced, data));
    } else {
      if (reduced.data() != data.data()) {
        DDPX_STEP_TRY(ctx, absl::StrCat("copying ", what), c.k->copy(reduced, data));
      }
      if (average) DDPX_STEP_TRY(ctx, absl::StrCat("dividing ", what), c.k->divide(data, c.world_size));
    }
    next(ctx);
  });
}

void finish_step(const Ctx& ctx) {
  DeviceStepContext& c = *ctx;
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
  DeviceStepContext& c = *ctx;
  const bool error_feedback = c.state->options().use_error_feedback;
  const CompressionPlan& plan = c.in.plan;
  DDPX_STEP_TRY(ctx, "decompressing",
                for_each_group(c, [&](const MatrixGroup& g) -> absl::Status {
                  Tensor out = group_matrices(c.in.buffer, plan, g);
                  absl::Status s = c.k->matmul(factor_batch(c.p, plan, g, true), false,
                                               factor_batch(c.q, plan, g, false), true, out);
                  if (!s.ok() || !error_feedback) return s;
                  Tensor e = group_matrices(c.m, plan, g).flatten();
                  return c.k->add_scaled(e, -1.0f, out.flatten(), e);
                }));
  finish_step(ctx);
}

// Stage 4: orthogonalize the reduced Ps, Q = M^T P, allreduce the Qs.
void compute_qs(const Ctx& ctx) {
  DeviceStepContext& c = *ctx;
  const CompressionPlan& plan = c.in.plan;
  DDPX_STEP_TRY(ctx, "orthogonalizing P", orthogonalize_all(c, true));
  DDPX_STEP_TRY(ctx, "Q = M^T P", for_each_group(c, [&](const MatrixGroup& g) {
                  return c.k->matmul(group_matrices(c.m, plan, g), true,
                                     factor_batch(c.p, plan, g, true), false,
                                     factor_batch(c.q, plan, g, false));
                }));
  allreduce_then(ctx, c.q.view(0, {plan.q_numel}), "Qs", /*average=*/true, decompress);
}

// Stage 3: the averaged uncompressed tensors back into the buffer (and out
// of the error), then allreduce the Ps.
void unpack_uncompressed(const Ctx& ctx) {
  DeviceStepContext& c = *ctx;
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

// A memory on the device: the existing device tensor, or one uploaded from
// the host vector (a checkpoint was loaded, or the bucket moved from the
// CPU), or a new one `fill`ed. The host vector is then released: the device
// copy holds the truth.
absl::Status ensure_device_memory(DeviceStepContext& c, std::vector<float>& host,
                                  Tensor& device, int64_t numel, bool* created) {
  *created = false;
  if (device.defined()) return absl::OkStatus();
  absl::StatusOr<Tensor> t = device_tensor(numel, DType::kFloat32, c.device);
  if (!t.ok()) return t.status();
  if (!host.empty()) {
    Tensor staged = Tensor::from_blob(host.data(), {numel}, DType::kFloat32);
    if (absl::Status s = t->copy_from(staged); !s.ok()) return s;
  } else {
    if (absl::Status s = c.k->fill(*t, 0.0f); !s.ok()) return s;
    *created = true;
  }
  host.clear();
  host.shrink_to_fit();
  device = *t;
  return absl::OkStatus();
}

int64_t remembered_numel(const std::vector<float>& host, const Tensor& device) {
  return device.defined() ? device.numel() : static_cast<int64_t>(host.size());
}

// Stages 1-2 on the caller's thread.
absl::Status prepare(DeviceStepContext& c) {
  const CompressionPlan& plan = c.in.plan;
  const PowerSGDOptions& options = c.state->options();
  const int64_t n = c.in.buffer.numel();
  PowerSGDBucketMemory& mem = *c.memory;
  // Check what the state remembers before changing any of it.
  const int64_t error_numel = remembered_numel(mem.error, mem.device_error);
  if (options.use_error_feedback && error_numel != 0 && error_numel != n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " has ", n,
        " elements but its remembered error has ", error_numel,
        " (did buckets change after start_powerSGD_iter?)"));
  }
  const int64_t p_numel = remembered_numel(mem.p_memory, mem.device_p_memory);
  const int64_t q_numel = remembered_numel(mem.q_memory, mem.device_q_memory);
  if (options.warm_start && mem.low_rank_initialized &&
      (p_numel != plan.p_numel || q_numel != plan.q_numel)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PowerSGD bucket ", c.in.bucket_index, " needs P/Q memory of ", plan.p_numel, "/",
        plan.q_numel, " elements but remembers ", p_numel, "/", q_numel));
  }
  c.groups = device_matrix_groups(plan);
  c.m = c.in.buffer;
  bool created = false;
  if (options.use_error_feedback) {
    if (absl::Status s = ensure_device_memory(c, mem.error, mem.device_error, n, &created);
        !s.ok()) {
      return s;
    }
    // M = input + error, in the error buffer (the input stays untouched).
    c.m = mem.device_error;
    if (absl::Status s = c.k->add_scaled(c.m, 1.0f, c.in.buffer, c.m); !s.ok()) return s;
  }

  if (plan.uncompressed_numel > 0) {
    absl::StatusOr<Tensor> packed =
        device_tensor(plan.uncompressed_numel, DType::kFloat32, c.device);
    if (!packed.ok()) return packed.status();
    c.uncompressed = *packed;
  }
  int64_t at = 0;
  for (const auto& [offset, numel] : plan.uncompressed) {
    if (numel == 0) continue;
    if (absl::Status s = c.k->copy(c.m.view(offset, {numel}), c.uncompressed.view(at, {numel}));
        !s.ok()) {
      return s;
    }
    at += numel;
  }
  if (plan.p_numel == 0) {
    // As the CPU step: nothing to remember, but the memory counts as set up.
    if (options.warm_start) mem.low_rank_initialized = true;
    return absl::OkStatus();
  }

  bool randomize = true;
  if (options.warm_start) {
    const bool had = mem.low_rank_initialized;
    bool p_created = false, q_created = false;
    if (absl::Status s = ensure_device_memory(c, mem.p_memory, mem.device_p_memory,
                                              plan.p_numel, &p_created);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ensure_device_memory(c, mem.q_memory, mem.device_q_memory,
                                              plan.q_numel, &q_created);
        !s.ok()) {
      return s;
    }
    mem.low_rank_initialized = true;
    randomize = !had;
    c.p = mem.device_p_memory;
    c.q = mem.device_q_memory;
  } else {
    absl::StatusOr<Tensor> p = device_tensor(plan.p_numel, DType::kFloat32, c.device);
    if (!p.ok()) return p.status();
    absl::StatusOr<Tensor> q = device_tensor(plan.q_numel, DType::kFloat32, c.device);
    if (!q.ok()) return q.status();
    c.p = *p;
    c.q = *q;
  }
  if (randomize) {
    // Drawn on the host from the state's generator, as the CPU step draws it
    // (the same values on every rank and on either path), then copied.
    Tensor fresh = Tensor::zeros({plan.q_numel}, DType::kFloat32);
    fill_standard_normal(fresh.data_as<float>(), plan.q_numel, c.state->next_random_seed());
    if (absl::Status s = c.q.copy_from(fresh); !s.ok()) return s;
  }
  if (absl::Status s = orthogonalize_all(c, false); !s.ok()) return s;
  return for_each_group(c, [&](const MatrixGroup& g) {
    return c.k->matmul(group_matrices(c.m, plan, g), false, factor_batch(c.q, plan, g, false),
                       false, factor_batch(c.p, plan, g, true));
  });
}

}  // namespace

absl::Status device_load_bucket(const Tensor& bucket, const Tensor& into, DeviceKernels& k,
                                const std::string& what) {
  const DType d = bucket.defined() ? bucket.dtype() : DType::kFloat32;
  if (!bucket.defined() ||
      (d != DType::kFloat32 && d != DType::kFloat16 && d != DType::kBFloat16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": needs a float32, float16 or bfloat16 bucket, got ",
        bucket.defined() ? bucket.str() : "an undefined buffer"));
  }
  const Tensor head = into.view(0, {bucket.numel()});
  if (d == DType::kFloat32) return k.copy(bucket.flatten(), head);
  return k.cast(bucket.flatten(), head);
}

absl::StatusOr<Tensor> device_float32_work(const Tensor& bucket, DeviceKernels& k,
                                           const std::string& what) {
  if (bucket.defined() && bucket.dtype() == DType::kFloat32) return bucket.flatten();
  const int64_t n = bucket.defined() ? bucket.numel() : 0;
  absl::StatusOr<Tensor> work = Tensor::empty({n}, DType::kFloat32,
                                              bucket.defined() ? bucket.device() : Device::cpu());
  if (!work.ok()) return work.status();
  if (absl::Status s = device_load_bucket(bucket, *work, k, what); !s.ok()) return s;
  return work;
}

absl::Status device_store_result(const Tensor& work, const Tensor& bucket, DeviceKernels& k) {
  if (work.data() == bucket.data() && work.dtype() == bucket.dtype()) return absl::OkStatus();
  const Tensor head = work.flatten().view(0, {bucket.numel()});
  if (bucket.dtype() == DType::kFloat32) return k.copy(head, bucket.flatten());
  return k.cast(head, bucket.flatten());
}

std::vector<MatrixGroup> device_matrix_groups(const CompressionPlan& plan) {
  std::vector<MatrixGroup> groups;
  for (size_t i = 0; i < plan.matrices.size(); ++i) {
    const CompressedMatrix& mat = plan.matrices[i];
    if (!groups.empty()) {
      const CompressedMatrix& prev = plan.matrices[i - 1];
      const bool same_shape =
          mat.rows == prev.rows && mat.cols == prev.cols && mat.rank == prev.rank;
      const bool follows = mat.offset == prev.offset + prev.rows * prev.cols &&
                           mat.p_offset == prev.p_offset + prev.rows * prev.rank &&
                           mat.q_offset == prev.q_offset + prev.cols * prev.rank;
      if (same_shape && follows) {
        ++groups.back().count;
        continue;
      }
    }
    groups.push_back(MatrixGroup{i, 1});
  }
  return groups;
}

std::shared_ptr<Future<Tensor>> run_powersgd_device_step(
    std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
    PowerSGDDeviceStepInput input) {
  auto ctx = std::make_shared<DeviceStepContext>();
  ctx->result = Future<Tensor>::create();
  const DType wire = input.wire_dtype;
  if (input.kernels == nullptr || !input.buffer.defined() ||
      input.buffer.dtype() != DType::kFloat32 ||
      (wire != DType::kFloat32 && wire != DType::kFloat16 && wire != DType::kBFloat16)) {
    ctx->result->set_error(absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD bucket ", input.bucket_index,
        ": a device step needs device kernels and a float32 buffer with a float32, float16 "
        "or bfloat16 wire, got ",
        input.buffer.defined() ? input.buffer.str() : "an undefined buffer", " and a ",
        dtype_name(wire), " wire", input.kernels == nullptr ? " (no kernels)" : "")));
    return ctx->result;
  }
  ctx->world_size = pg ? static_cast<float>(pg->size()) : 1.0f;
  ctx->memory = &state->bucket_memory(input.bucket_index);
  state->record_compression(input.plan.numel_before, input.plan.numel_after,
                            input.bucket_is_last);
  ctx->k = input.kernels;
  ctx->device = input.buffer.device();
  ctx->pg = std::move(pg);
  ctx->state = std::move(state);
  ctx->in = std::move(input);
  ctx->in.buffer = ctx->in.buffer.flatten();
  absl::Status prepared = prepare(*ctx);
  if (!prepared.ok()) {
    ctx->result->set_error(absl::Status(
        prepared.code(), absl::StrCat("PowerSGD bucket ", ctx->in.bucket_index, " on ",
                                      ctx->device.str(), ": ", prepared.message())));
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
