// N ranks as threads of one test process: the one helper every test uses to
// start them. Ranks meet through one HashStore (each rank its own client of
// it, as separate processes would have) and talk Gloo over loopback TCP, or
// shared memory where the backend picks it. gtest failures inside a rank's
// body are recorded as usual (an ASSERT ends that rank's body only).
#ifndef DDPX_TESTS_RANK_THREADS_H_
#define DDPX_TESTS_RANK_THREADS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/front_end/process_group.h"
#include "store/store.h"

namespace ddpx {
namespace rank_threads {

inline constexpr std::chrono::milliseconds kTimeout{20000};

// Runs fn(rank) on one thread per rank and joins them.
void on_every_rank(int size, const std::function<void(int rank)>& fn);

// How the ranks' groups are built.
struct GroupOptions {
  // A backend string, through the registry ("gloo", "round_robin:gloo*2"),
  // which reads DDPX_GLOO_* from the environment...
  std::string backend = "gloo";
  // ...unless these are set: then each rank's backend is a GlooBackend
  // with exactly these options.
  std::optional<GlooOptions> gloo;
  // Called with each rank's copy of `gloo` before its backend is built
  // (say, to give the ranks different host identities).
  std::function<void(int rank, GlooOptions&)> gloo_for_rank;
  // The rendezvous's and the groups' timeout.
  std::chrono::milliseconds timeout = kTimeout;
};
GroupOptions gloo_groups(GlooOptions options, std::chrono::milliseconds timeout = kTimeout);

// `size` groups (rank r at index r), rendezvousing in parallel threads;
// aborts the test binary naming the rank and its error if one fails.
std::vector<std::shared_ptr<ProcessGroup>> make_groups(int size,
                                                       const GroupOptions& options = {});
std::vector<std::shared_ptr<ProcessGroup>> make_groups(int size, const std::string& backend,
                                                       std::chrono::milliseconds timeout = kTimeout);

// body(rank, group) on `size` threads, each building its own group and
// handing body the only reference to it.
void run_groups(int size,
                const std::function<void(int rank, std::shared_ptr<ProcessGroup>)>& body,
                const GroupOptions& options = {});

// ---- Gloo backends alone, for the backend's own tests ----------------------

// TCP on 127.0.0.1 only: these pin the Gloo paths (tests/process_group/shm/
// turns the shared-memory one on, which the backend would take here, every
// rank being on this host).
GlooOptions local_gloo_options(int num_workers = 2);

// body(backend) on `size` threads, one GlooBackend each (over `store`, a new
// HashStore when null).
void run_gloo_backends(int size, const std::function<void(GlooBackend&)>& body,
                       const GlooOptions& options = local_gloo_options(),
                       std::chrono::milliseconds timeout = kTimeout,
                       std::shared_ptr<Store> store = nullptr);

// Waits for a work and returns its status, with a generous cap, so that a
// bug shows up as a failure rather than a hung test.
absl::Status wait_ok(const std::shared_ptr<Work>& work);

}  // namespace rank_threads
}  // namespace ddpx

// Asserts a Work succeeded, printing its error otherwise.
#define ASSERT_WORK_OK(work_expr)                                         \
  do {                                                                    \
    absl::Status ddpx_status_ = ::ddpx::rank_threads::wait_ok(work_expr); \
    ASSERT_TRUE(ddpx_status_.ok()) << ddpx_status_;                       \
  } while (0)

#endif  // DDPX_TESTS_RANK_THREADS_H_
