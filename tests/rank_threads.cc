#include "tests/rank_threads.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "process_group/rendezvous/init.h"
#include "store/hash_store.h"

namespace ddpx {
namespace rank_threads {
namespace {

// Rank `rank`'s group over its own client of `store`.
absl::StatusOr<std::shared_ptr<ProcessGroup>> build_group(int rank, int size,
                                                          HashStore& store,
                                                          const GroupOptions& options) {
  absl::StatusOr<std::unique_ptr<Store>> client = store.clone();
  if (!client.ok()) return client.status();
  std::shared_ptr<Store> mine = std::move(*client);
  absl::StatusOr<std::shared_ptr<Backend>> backend;
  if (options.gloo.has_value()) {
    GlooOptions gloo = *options.gloo;
    if (options.gloo_for_rank) options.gloo_for_rank(rank, gloo);
    absl::StatusOr<std::shared_ptr<GlooBackend>> b =
        GlooBackend::create(mine, rank, size, options.timeout, gloo);
    if (!b.ok()) return b.status();
    backend = std::shared_ptr<Backend>(*std::move(b));
  } else {
    backend = create_backend(options.backend, mine, rank, size, options.timeout);
  }
  if (!backend.ok()) return backend.status();
  return std::make_shared<ProcessGroup>(*std::move(backend), mine, options.timeout);
}

}  // namespace

void on_every_rank(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

GroupOptions gloo_groups(GlooOptions options, std::chrono::milliseconds timeout) {
  GroupOptions o;
  o.gloo = std::move(options);
  o.timeout = timeout;
  return o;
}

std::vector<std::shared_ptr<ProcessGroup>> make_groups(int size, const GroupOptions& options) {
  HashStore store(options.timeout);
  std::vector<std::shared_ptr<ProcessGroup>> groups(size);
  std::vector<absl::Status> errors(size);
  on_every_rank(size, [&](int rank) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g = build_group(rank, size, store, options);
    if (g.ok()) {
      groups[rank] = *std::move(g);
    } else {
      errors[rank] = g.status();
    }
  });
  for (int r = 0; r < size; ++r) {
    if (!errors[r].ok()) {
      fprintf(stderr, "rank_threads::make_groups: rank %d: %s\n", r,
              errors[r].ToString().c_str());
      abort();
    }
  }
  return groups;
}

std::vector<std::shared_ptr<ProcessGroup>> make_groups(int size, const std::string& backend,
                                                       std::chrono::milliseconds timeout) {
  GroupOptions o;
  o.backend = backend;
  o.timeout = timeout;
  return make_groups(size, o);
}

void run_groups(int size,
                const std::function<void(int rank, std::shared_ptr<ProcessGroup>)>& body,
                const GroupOptions& options) {
  HashStore store(options.timeout);
  on_every_rank(size, [&](int rank) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g = build_group(rank, size, store, options);
    ASSERT_TRUE(g.ok()) << "rank " << rank << ": " << g.status();
    body(rank, *std::move(g));
  });
}

GlooOptions local_gloo_options(int num_workers) {
  GlooOptions o;
  o.hostname = "127.0.0.1";
  o.num_workers = num_workers;
  o.shared_memory = false;
  return o;
}

void run_gloo_backends(int size, const std::function<void(GlooBackend&)>& body,
                       const GlooOptions& options, std::chrono::milliseconds timeout,
                       std::shared_ptr<Store> store) {
  if (store == nullptr) store = std::make_shared<HashStore>(timeout);
  on_every_rank(size, [&](int rank) {
    auto backend = GlooBackend::create(store, rank, size, timeout, options);
    ASSERT_TRUE(backend.ok()) << "rank " << rank << ": " << backend.status();
    body(**backend);
  });
}

absl::Status wait_ok(const std::shared_ptr<Work>& work) {
  return work->wait(std::chrono::seconds(30));
}

}  // namespace rank_threads
}  // namespace ddpx
