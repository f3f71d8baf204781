#include "hooks/default_hooks.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"

namespace ddpx {
namespace {

class AllreduceHook : public CountingHook {
 public:
  explicit AllreduceHook(std::shared_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}
  std::string name() const override { return "allreduce"; }
  HookStats stats() const override { return counter_.snapshot(); }
  bool issues_collectives_after_run() const override { return false; }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    const Tensor& buffer = bucket.buffer();
    const uint64_t bytes = buffer.nbytes();
    const uint64_t wire = allreduce_wire_bytes(bytes, pg_->size());
    counter_.add_call(bytes, wire);
    counter_.add_traffic(bytes, wire);
    return allreduce_average(*pg_, buffer);
  }

 private:
  std::shared_ptr<ProcessGroup> pg_;
  HookStatsCounter counter_;
};

// fp16_compress_hook / bf16_compress_hook.
class CompressHook : public CountingHook {
 public:
  CompressHook(std::shared_ptr<ProcessGroup> pg, DType wire_dtype)
      : pg_(std::move(pg)), wire_dtype_(wire_dtype) {}
  std::string name() const override {
    return wire_dtype_ == DType::kFloat16 ? "fp16" : "bf16";
  }
  HookStats stats() const override { return counter_.snapshot(); }
  bool issues_collectives_after_run() const override { return false; }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    const Tensor buffer = bucket.buffer();
    const std::string what = name() + " hook";
    absl::StatusOr<Tensor> compressed = cast_divided(buffer, wire_dtype_, pg_->size(), what);
    if (!compressed.ok()) return Future<Tensor>::failed(compressed.status());
    const uint64_t sent = compressed->nbytes();
    counter_.add_call(buffer.nbytes(), allreduce_wire_bytes(buffer.nbytes(), pg_->size()));
    counter_.add_traffic(sent, allreduce_wire_bytes(sent, pg_->size()));
    return pg_->allreduce({*compressed})->get_future()->then(
        [buffer, what](TensorList& out) -> absl::StatusOr<Tensor> {
          if (absl::Status s = copy_converted(buffer, out.at(0), what); !s.ok()) return s;
          return buffer;
        });
  }

 private:
  std::shared_ptr<ProcessGroup> pg_;
  DType wire_dtype_;
  HookStatsCounter counter_;
};

// fp16_compress_wrapper / bf16_compress_wrapper.
class CompressWrapper : public CountingHook {
 public:
  CompressWrapper(std::unique_ptr<CommHook> inner, DType dtype)
      : inner_(std::move(inner)), dtype_(dtype) {}
  std::string name() const override {
    return absl::StrCat(dtype_ == DType::kFloat16 ? "fp16" : "bf16", "+", inner_->name());
  }
  bool issues_collectives_after_run() const override {
    return inner_->issues_collectives_after_run();
  }
  // Traffic is the inner hook's; input and baseline are the original
  // (wide) bucket's, so the ratio shows the cast's saving too.
  HookStats stats() const override {
    HookStats inner = comm_hook_stats(*inner_);
    HookStats own = counter_.snapshot();
    own.payload_bytes = inner.payload_bytes;
    own.wire_bytes = inner.wire_bytes;
    return own;
  }
  absl::Status save_state(std::ostream& out) const override { return inner_->save_state(out); }
  absl::Status load_state(std::istream& in) override { return inner_->load_state(in); }
  int64_t state_iteration() const override { return inner_->state_iteration(); }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    const Tensor buffer = bucket.buffer();
    const std::string what = name() + " wrapper";
    absl::StatusOr<Tensor> narrow = cast_divided(buffer, dtype_, 1, what);
    if (!narrow.ok()) return Future<Tensor>::failed(narrow.status());
    // The inner hook's `set_buffer`/`gradients()` act on the narrow copy,
    // with the original bucket's layout.
    auto narrow_bucket = std::make_shared<GradBucket>(
        bucket.index(), bucket.is_last(), *narrow, bucket.offsets(),
        bucket.shapes(), bucket.parameters());
    // The wrapper does not know the world size; its baseline (a float32
    // allreduce of the original bucket) is the inner hook's baseline for the
    // narrow copy scaled by the width ratio.
    HookStats before = comm_hook_stats(*inner_);
    std::shared_ptr<Future<Tensor>> inner_result = inner_->run(*narrow_bucket);
    HookStats after = comm_hook_stats(*inner_);
    const double widen = static_cast<double>(buffer.element_size()) /
                         static_cast<double>(narrow->element_size());
    counter_.add_call(buffer.nbytes(),
                      static_cast<uint64_t>(widen * (after.baseline_wire_bytes -
                                                     before.baseline_wire_bytes)));
    return inner_result->then(
        [buffer, narrow_bucket, what](Tensor& result) -> absl::StatusOr<Tensor> {
          if (absl::Status s = copy_converted(buffer, result, what); !s.ok()) return s;
          return buffer;
        });
  }

 private:
  std::unique_ptr<CommHook> inner_;
  DType dtype_;
  HookStatsCounter counter_;
};

class NoopHook : public CountingHook {
 public:
  // `pg` null: no communication at all; else every bucket waits at a barrier.
  explicit NoopHook(std::shared_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}
  std::string name() const override { return "noop"; }
  HookStats stats() const override { return counter_.snapshot(); }
  bool issues_collectives_after_run() const override { return false; }
  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    counter_.add_call(bucket.buffer().nbytes(), 0);
    if (pg_ == nullptr) return Future<Tensor>::ready(bucket.buffer());
    Tensor buffer = bucket.buffer();
    return pg_->barrier()->get_future()->then([buffer](TensorList&) { return buffer; });
  }

 private:
  std::shared_ptr<ProcessGroup> pg_;
  HookStatsCounter counter_;
};

}  // namespace

std::shared_ptr<Future<Tensor>> allreduce_average(ProcessGroup& pg,
                                                  const Tensor& buffer) {
  // Divide first (as torch's _allreduce_fut does) so a low-precision bucket
  // cannot overflow in the sum.
  if (absl::Status s = divide_in_place(buffer, pg.size(), "allreduce hook"); !s.ok()) {
    return Future<Tensor>::failed(s);
  }
  // Allreduce works in place: the buffer is the result.
  return pg.allreduce({buffer})->get_future()->then(
      [buffer](TensorList&) { return buffer; });
}

std::unique_ptr<CountingHook> make_allreduce_hook(std::shared_ptr<ProcessGroup> pg) {
  return std::make_unique<AllreduceHook>(std::move(pg));
}
std::unique_ptr<CountingHook> make_fp16_compress_hook(std::shared_ptr<ProcessGroup> pg) {
  return std::make_unique<CompressHook>(std::move(pg), DType::kFloat16);
}
std::unique_ptr<CountingHook> make_bf16_compress_hook(std::shared_ptr<ProcessGroup> pg) {
  return std::make_unique<CompressHook>(std::move(pg), DType::kBFloat16);
}
std::unique_ptr<CountingHook> fp16_compress_wrapper(std::unique_ptr<CommHook> hook) {
  return std::make_unique<CompressWrapper>(std::move(hook), DType::kFloat16);
}
std::unique_ptr<CountingHook> bf16_compress_wrapper(std::unique_ptr<CommHook> hook) {
  return std::make_unique<CompressWrapper>(std::move(hook), DType::kBFloat16);
}
std::unique_ptr<CountingHook> make_noop_hook() { return std::make_unique<NoopHook>(nullptr); }
std::unique_ptr<CountingHook> make_synchronizing_noop_hook(std::shared_ptr<ProcessGroup> pg) {
  return std::make_unique<NoopHook>(std::move(pg));
}

}  // namespace ddpx
