#include "hooks/int8_hook.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/bytegrad.h"
#include "hooks/kernels/cpu_kernels.h"
#include "process_group/init.h"

namespace ddpx {
namespace {

// A float32 bucket on the CPU, or (flat mode only: the node-level reduce
// divides on the host) on a device this build has kernels for.
absl::Status check_bucket(const Tensor& buffer, bool hierarchical) {
  if (buffer.defined() && !buffer.device().is_cpu()) {
    absl::StatusOr<DeviceKernels*> k = kernels_for(buffer, "int8 hook");
    if (!k.ok()) return k.status();
    if (hierarchical) {
      return absl::InvalidArgumentError(absl::StrCat(
          "int8 hook: hierarchical mode runs on CPU buckets only, got ", buffer.str(),
          " (use the flat int8 hook on devices)"));
    }
  } else if (absl::Status s = check_cpu(buffer, "int8 hook"); !s.ok()) {
    return s;
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
        hierarchical_(hierarchical) {}

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
    if (local_ == nullptr) return bytegrad_average(cross_, data, counter_.get());
    return run_hierarchical(data);
  }

 private:
  // Full precision inside the host, ByteGrad across hosts on 1/L slices:
  //   1. reduce-scatter (SUM) inside the host: local rank j gets slice j of
  //      the host's sum, and divides it by L (the host's average);
  //   2. every local rank j averages its slice with its peers on the other
  //      hosts through the quantized exchange (all L at once, each 1/L of
  //      the bucket: the same bytes over the uplink as one leader sending
  //      the whole bucket, in L streams instead of one);
  //   3. allgather inside the host.
  std::shared_ptr<Future<Tensor>> run_hierarchical(Tensor data) {
    const int64_t local_size = local_->size();
    const int64_t n = data.numel();
    const int64_t slice = (n + local_size - 1) / local_size;
    // Full-precision traffic inside the host: the reduce-scatter and the
    // allgather.
    const uint64_t local_wire = data.nbytes() * (local_size - 1) / local_size;
    counter_->add_traffic(2 * data.nbytes(), 2 * local_wire);

    // Per call: buckets of one step are in flight at once.
    Tensor whole = Tensor::zeros({slice * local_size}, DType::kFloat32);
    Tensor mine = Tensor::zeros({slice}, DType::kFloat32);
    memcpy(whole.data(), data.data(), data.nbytes());
    auto result = Future<Tensor>::create();
    // The callbacks own what they use: the hook may go before its futures.
    std::shared_ptr<ProcessGroup> local = local_;
    std::shared_ptr<ProcessGroup> cross = cross_;
    std::shared_ptr<HookStatsCounter> counter = counter_;
    auto fail = [result](const char* step, const absl::Status& s) {
      result->set_error(
          absl::Status(s.code(), absl::StrCat("int8 hook (", step, "): ", s.message())));
    };
    auto gather = [=]() {
      local->allgather_into_tensor(whole, mine)->get_future()->add_callback(
          [=](Future<TensorList>& done) {
            if (!done.status().ok()) return fail("allgather inside the host", done.status());
            memcpy(data.data(), whole.data(), data.nbytes());
            result->set_value(data);
          });
    };
    local->reduce_scatter_tensor(mine, whole)->get_future()->add_callback(
        [=](Future<TensorList>& reduced) {
          if (!reduced.status().ok()) {
            return fail("reduce-scatter inside the host", reduced.status());
          }
          kernels::divide(mine.data_as<float>(), slice, static_cast<float>(local_size));
          bytegrad_average(cross, mine, counter.get())->add_callback([=](Future<Tensor>& exchanged) {
            if (!exchanged.status().ok()) return fail("exchange across hosts", exchanged.status());
            gather();
          });
        });
    return result;
  }

  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<ProcessGroup> local_;
  std::shared_ptr<ProcessGroup> cross_;
  bool hierarchical_;
  std::shared_ptr<HookStatsCounter> counter_ = std::make_shared<HookStatsCounter>();
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
