// Test helper: a group of N ranks as threads of this process, over one
// HashStore, with a real backend (gloo over loopback TCP).
#ifndef DDPX_TESTS_PROCESS_GROUP_THREAD_GROUPS_H_
#define DDPX_TESTS_PROCESS_GROUP_THREAD_GROUPS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "process_group/process_group.h"

namespace ddpx {
namespace testing_util {

// Builds `size` ProcessGroups (rank i at index i) with the backend string
// `backend`, rendezvousing in parallel threads. Aborts the test binary with
// a message if any rank fails to connect.
std::vector<std::shared_ptr<ProcessGroup>> make_thread_groups(
    int size, const std::string& backend = "gloo",
    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Runs fn(rank) on one thread per rank and joins them.
void on_every_rank(int size, const std::function<void(int rank)>& fn);

}  // namespace testing_util
}  // namespace ddpx

#endif  // DDPX_TESTS_PROCESS_GROUP_THREAD_GROUPS_H_
