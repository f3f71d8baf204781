#include "hooks/int8_hook.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/bytegrad.h"
#include "hooks/kernels/cpu_kernels.h"
#include "process_group/init.h"
#include "store/prefix_store.h"

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
  // `local` is null in flat mode (and for local size 1); `leaders` is the
  // group the quantized exchange runs in (null on non-leaders).
  Int8Hook(std::shared_ptr<ProcessGroup> pg, std::shared_ptr<ProcessGroup> local,
           std::shared_ptr<ProcessGroup> leaders, bool hierarchical)
      : pg_(std::move(pg)),
        local_(std::move(local)),
        leaders_(std::move(leaders)),
        hierarchical_(hierarchical) {}

  std::string name() const override {
    return hierarchical_ ? "int8:hierarchical" : "int8";
  }
  HookStats stats() const override { return counter_.snapshot(); }

  std::shared_ptr<Future<Tensor>> run(GradBucket& bucket) override {
    Tensor data = bucket.buffer();
    if (absl::Status s = check_bucket(data, local_ != nullptr); !s.ok()) {
      return Future<Tensor>::failed(s);
    }
    counter_.add_call(data.nbytes(), allreduce_wire_bytes(data.nbytes(), pg_->size()));
    if (local_ == nullptr) return bytegrad_average(*leaders_, data, &counter_);
    return run_hierarchical(data);
  }

 private:
  std::shared_ptr<Future<Tensor>> run_hierarchical(Tensor data) {
    const int local_size = local_->size();
    const bool leader = local_->rank() == 0;
    // Full-precision traffic inside the node: the reduce and the broadcast.
    const uint64_t local_wire = data.nbytes() * (local_size - 1) / local_size;
    counter_.add_traffic(2 * data.nbytes(), 2 * local_wire);

    auto result = Future<Tensor>::create();
    // Raw pointers: the hook owns the groups and outlives its futures (a
    // group released on its own backend thread could not join that thread).
    ProcessGroup* local = local_.get();
    ProcessGroup* leaders = leaders_.get();
    HookStatsCounter* counter = &counter_;
    auto broadcast = [local, data, result]() {
      local->broadcast({data})->get_future()->add_callback(
          [data, result](Future<TensorList>& done) {
            if (!done.status().ok()) {
              result->set_error(absl::Status(
                  done.status().code(),
                  absl::StrCat("int8 hook (broadcast inside the node): ",
                               done.status().message())));
              return;
            }
            result->set_value(data);
          });
    };
    local->reduce({data})->get_future()->add_callback(
        [=](Future<TensorList>& reduced) {
          if (!reduced.status().ok()) {
            result->set_error(absl::Status(
                reduced.status().code(),
                absl::StrCat("int8 hook (reduce to the node leader): ",
                             reduced.status().message())));
            return;
          }
          if (!leader) {
            broadcast();
            return;
          }
          kernels::divide(data.data_as<float>(), data.numel(),
                          static_cast<float>(local_size));
          bytegrad_average(*leaders, data, counter)
              ->add_callback([=](Future<Tensor>& exchanged) {
                if (!exchanged.status().ok()) {
                  result->set_error(exchanged.status());
                  return;
                }
                broadcast();
              });
        });
    return result;
  }

  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<ProcessGroup> local_;
  std::shared_ptr<ProcessGroup> leaders_;
  bool hierarchical_;
  HookStatsCounter counter_;
};

absl::StatusOr<int> local_size_of(const Int8HookOptions& options, int world) {
  int local = options.local_size;
  if (local == 0) {
    const char* env = std::getenv("LOCAL_WORLD_SIZE");
    if (env == nullptr) {
      return absl::InvalidArgumentError(
          "int8 hook: hierarchical mode needs the number of ranks per node: set "
          "LOCAL_WORLD_SIZE or pass local_size=N");
    }
    if (!absl::SimpleAtoi(env, &local)) {
      return absl::InvalidArgumentError(
          absl::StrCat("int8 hook: LOCAL_WORLD_SIZE='", env, "' is not an integer"));
    }
  }
  if (local < 1 || world % local != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "int8 hook: local size ", local, " must be positive and divide the group size ",
        world));
  }
  return local;
}

// A group of `ranks`-many members over `pg`'s store and backend kind.
absl::StatusOr<std::shared_ptr<ProcessGroup>> subgroup(
    const ProcessGroup& pg, const std::string& prefix, int rank, int size) {
  auto store = std::make_shared<PrefixStore>(prefix, pg.store());
  absl::StatusOr<std::shared_ptr<Backend>> backend =
      create_backend(pg.backend_name(), store, rank, size, pg.timeout());
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("int8 hook: building subgroup ", prefix, ": ",
                                     backend.status().message()));
  }
  return std::make_shared<ProcessGroup>(*backend, store, pg.timeout());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CountingHook>> make_int8_hook(
    std::shared_ptr<ProcessGroup> pg, const Int8HookOptions& options) {
  if (pg == nullptr) return absl::InvalidArgumentError("int8 hook: no process group");
  if (!options.hierarchical) {
    return std::unique_ptr<CountingHook>(new Int8Hook(pg, nullptr, pg, false));
  }
  absl::StatusOr<int> local_size = local_size_of(options, pg->size());
  if (!local_size.ok()) return local_size.status();
  if (*local_size == 1) {
    return std::unique_ptr<CountingHook>(new Int8Hook(pg, nullptr, pg, true));
  }
  if (pg->store() == nullptr) {
    return absl::FailedPreconditionError(
        "int8 hook: hierarchical mode builds subgroups from the group's store, "
        "and this group has none");
  }
  // Ranks create their hooks in the same order, so the n-th hierarchical
  // hook of every rank gets the same key prefix.
  absl::StatusOr<int64_t> instance =
      pg->store()->add(absl::StrCat("int8_hierarchical/count/", pg->rank()), 1);
  if (!instance.ok()) return instance.status();
  const std::string base = absl::StrCat("int8_hierarchical/", *instance, "/");
  const int node = pg->rank() / *local_size;
  const int local_rank = pg->rank() % *local_size;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> local =
      subgroup(*pg, absl::StrCat(base, "node", node), local_rank, *local_size);
  if (!local.ok()) return local.status();
  std::shared_ptr<ProcessGroup> leaders;
  if (local_rank == 0) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g =
        subgroup(*pg, base + "leaders", node, pg->size() / *local_size);
    if (!g.ok()) return g.status();
    leaders = *g;
  }
  return std::unique_ptr<CountingHook>(new Int8Hook(pg, *local, leaders, true));
}

}  // namespace ddpx
