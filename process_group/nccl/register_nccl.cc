// Registers "nccl" with the backend registry when the process starts, so
// init_process_group({.backend = "nccl"}) finds it. Linked with alwayslink,
// only under --config=cuda.
#include "process_group/rendezvous/init.h"
#include "process_group/nccl/nccl_backend.h"

namespace ddpx {
namespace {

const bool kNcclRegistered = [] {
  register_backend("nccl", [](std::shared_ptr<Store> store, int rank, int size,
                              std::chrono::milliseconds timeout)
                               -> absl::StatusOr<std::shared_ptr<Backend>> {
    nccl::NcclOptions base;
    base.timeout = timeout;
    absl::StatusOr<nccl::NcclOptions> options = nccl::options_from_env(base);
    if (!options.ok()) return options.status();
    absl::StatusOr<std::shared_ptr<nccl::NcclBackend>> backend =
        nccl::NcclBackend::create(std::move(store), rank, size, *options);
    if (!backend.ok()) return backend.status();
    return std::shared_ptr<Backend>(*backend);
  });
  return true;
}();

}  // namespace
}  // namespace ddpx
