#include "tests/process_group/thread_groups.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "process_group/init.h"
#include "store/hash_store.h"

namespace ddpx {
namespace testing_util {

void on_every_rank(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

std::vector<std::shared_ptr<ProcessGroup>> make_thread_groups(
    int size, const std::string& backend, std::chrono::milliseconds timeout) {
  auto store = std::make_shared<HashStore>(timeout);
  std::vector<std::shared_ptr<ProcessGroup>> groups(size);
  std::vector<absl::Status> errors(size);
  // Each rank gets its own handle on the shared map, as separate processes
  // would have their own connections.
  std::vector<std::shared_ptr<Store>> handles;
  for (int r = 0; r < size; ++r) handles.push_back(std::shared_ptr<Store>(*store->clone()));
  on_every_rank(size, [&](int rank) {
    absl::StatusOr<std::shared_ptr<Backend>> b =
        create_backend(backend, handles[rank], rank, size, timeout);
    if (!b.ok()) {
      errors[rank] = b.status();
      return;
    }
    groups[rank] = std::make_shared<ProcessGroup>(*b, handles[rank], timeout);
  });
  for (int r = 0; r < size; ++r) {
    if (!errors[r].ok()) {
      fprintf(stderr, "make_thread_groups: rank %d: %s\n", r,
              errors[r].ToString().c_str());
      abort();
    }
  }
  return groups;
}

}  // namespace testing_util
}  // namespace ddpx
