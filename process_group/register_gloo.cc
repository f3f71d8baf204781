// Registers "gloo" with the backend registry when the process starts, so
// init_process_group({.backend = "gloo"}) finds it. Linked with alwayslink:
// nothing references this file by symbol.
#include "process_group/gloo/gloo_backend.h"
#include "process_group/rendezvous/init.h"

namespace ddpx {
namespace {

const bool kGlooRegistered = [] {
  register_backend("gloo", [](std::shared_ptr<Store> store, int rank, int size,
                              std::chrono::milliseconds timeout) {
    return create_gloo_backend(std::move(store), rank, size, timeout);
  });
  return true;
}();

}  // namespace
}  // namespace ddpx
