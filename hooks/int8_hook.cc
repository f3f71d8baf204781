#include "hooks/int8_hook.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/bytegrad.h"
#include "hooks/int8_pipeline.h"
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

// Where this rank sits for hierarchical mode: its host (node), its place
// on it, and the host and rank counts.
struct Placement {
  int node = 0;
  int local_rank = 0;
  int local_size = 1;
  int nodes = 1;
};

// Nodes of `local` consecutive ranks (an explicit local_size, or the
// launcher's LOCAL_WORLD_SIZE), checked to divide the group.
absl::StatusOr<Placement> consecutive(int local, int rank, int world, const std::string& source) {
  if (local < 1 || world % local != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "int8 hook: local size ", local, " (", source,
        ") must be positive and divide the group size ", world));
  }
  return Placement{rank / local, rank % local, local, world / local};
}

// The explicit option first; else the hosts the group's backend saw at
// rendezvous (every host must have the same number of ranks); else
// LOCAL_WORLD_SIZE.
absl::StatusOr<Placement> placement_of(const Int8HookOptions& options, const ProcessGroup& pg) {
  if (options.local_size != 0) {
    return consecutive(options.local_size, pg.rank(), pg.size(), "option local_size");
  }
  if (const HostTopology* t = pg.host_topology(); t != nullptr) {
    if (!t->uniform()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "int8 hook: hierarchical mode needs the same number of ranks on every host; this "
          "group has ", t->host_count, " hosts with different counts (pass local_size=N to "
          "group consecutive ranks instead)"));
    }
    return Placement{t->host_index, t->local_rank, t->local_size, t->host_count};
  }
  const char* env = std::getenv("LOCAL_WORLD_SIZE");
  if (env == nullptr) {
    return absl::InvalidArgumentError(
        "int8 hook: hierarchical mode needs the number of ranks per node and this group's "
        "backend does not know its hosts: set LOCAL_WORLD_SIZE or pass local_size=N");
  }
  int local = 0;
  if (!absl::SimpleAtoi(env, &local)) {
    return absl::InvalidArgumentError(
        absl::StrCat("int8 hook: LOCAL_WORLD_SIZE='", env, "' is not an integer"));
  }
  return consecutive(local, pg.rank(), pg.size(), "LOCAL_WORLD_SIZE");
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
  absl::StatusOr<Placement> place = placement_of(options, *pg);
  if (!place.ok()) return place.status();
  if (place->local_size == 1) {
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
  absl::StatusOr<std::shared_ptr<ProcessGroup>> local = subgroup(
      *pg, absl::StrCat(base, "node", place->node), place->local_rank, place->local_size);
  if (!local.ok()) return local.status();
  absl::StatusOr<std::shared_ptr<ProcessGroup>> cross = subgroup(
      *pg, absl::StrCat(base, "cross", place->local_rank), place->node, place->nodes);
  if (!cross.ok()) return cross.status();
  return std::unique_ptr<CountingHook>(new Int8Hook(pg, *local, *cross, true));
}

}  // namespace ddpx
