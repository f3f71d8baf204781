#include "hooks/int8_hook.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/bytegrad.h"
#include "hooks/int8_pipeline.h"
#include "process_group/rendezvous/init.h"

namespace ddpx {
namespace {

// A float32 bucket on the CPU, or (flat mode only: the pipeline of pieces
// runs on the host) on a device this build has kernels for.
absl::Status check_bucket(const Tensor& buffer, bool hierarchical) {
  absl::StatusOr<DeviceKernels*> k = kernels_for(buffer, "int8 hook");
  if (!k.ok()) return k.status();
  if (hierarchical && !buffer.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "int8 hook: hierarchical mode runs on CPU buckets only, got ", buffer.str(),
        " (use the flat int8 hook on devices)"));
  }
  return check_dtype(buffer, DType::kFloat32, "int8 hook: bucket buffer");
}

class Int8Hook : public CountingHook {
 public:
  // Flat mode: `cross` is the whole group and `local` null. Hierarchical
  // mode: `local` is this rank's host and `cross` the ranks with this
  // rank's local rank, one per host.
  Int8Hook(std::shared_ptr<ProcessGroup> pg, std::shared_ptr<ProcessGroup> local,
           std::shared_ptr<ProcessGroup> cross, bool hierarchical)
      : pg_(std::move(pg)),
        local_(std::move(local)),
        cross_(std::move(cross)),
        hierarchical_(hierarchical) {
    pipeline_ = std::make_unique<Int8Pipeline>(local_, cross_, counter_.get());
  }

  std::string name() const override {
    return hierarchical_ ? "int8:hierarchical" : "int8";
  }
  HookStats stats() const override { return counter_->snapshot(); }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    Tensor data = bucket.buffer();
    if (absl::Status s = check_bucket(data, local_ != nullptr); !s.ok()) {
      return Future<Tensor>::failed(s);
    }
    counter_->add_call(data.nbytes(), allreduce_wire_bytes(data.nbytes(), pg_->size()));
    // Device buckets (flat mode only) take the exchange with device kernels.
    if (!data.device().is_cpu()) return bytegrad_average(cross_, data, counter_.get());
    return pipeline_->submit(data);
  }

 private:
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<ProcessGroup> local_;
  std::shared_ptr<ProcessGroup> cross_;
  bool hierarchical_;
  std::shared_ptr<HookStatsCounter> counter_ = std::make_shared<HookStatsCounter>();
  std::unique_ptr<Int8Pipeline> pipeline_;  // CPU buckets; goes before counter_
};

}  // namespace

absl::StatusOr<std::unique_ptr<CountingHook>> make_int8_hook(
    std::shared_ptr<ProcessGroup> pg, const Int8HookOptions& options) {
  if (pg == nullptr) return absl::InvalidArgumentError("int8 hook: no process group");
  if (!options.hierarchical) {
    return std::unique_ptr<CountingHook>(new Int8Hook(pg, nullptr, pg, false));
  }
  auto annotated = [](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("int8 hook: ", s.message()));
  };
  absl::StatusOr<HostPlacement> place = host_placement(*pg, options.local_size);
  if (!place.ok()) return annotated(place.status());
  if (place->local_size == 1) {
    return std::unique_ptr<CountingHook>(new Int8Hook(pg, nullptr, pg, true));
  }
  absl::StatusOr<std::shared_ptr<const HostSubgroups>> groups =
      host_subgroups(*pg, options.local_size);
  if (!groups.ok()) return annotated(groups.status());
  return std::unique_ptr<CountingHook>(
      new Int8Hook(pg, (*groups)->local, (*groups)->cross, true));
}

}  // namespace ddpx
