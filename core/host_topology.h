// Where the ranks of a group sit: which of them share a host.
#ifndef DDPX_CORE_HOST_TOPOLOGY_H_
#define DDPX_CORE_HOST_TOPOLOGY_H_

#include <vector>

namespace ddpx {

// Hosts numbered in the order of their lowest rank, ranks on a host in rank
// order. Built from every rank's host identity (host_identity.h).
struct HostTopology {
  int host_count = 1;
  int host_index = 0;  // this rank's host
  int local_rank = 0;  // this rank's place on its host
  int local_size = 1;  // ranks on this rank's host
  std::vector<std::vector<int>> ranks_by_host;

  // Every host has the same number of ranks.
  bool uniform() const {
    if (ranks_by_host.empty()) return true;
    for (const auto& ranks : ranks_by_host) {
      if (ranks.size() != ranks_by_host[0].size()) return false;
    }
    return true;
  }
};

}  // namespace ddpx

#endif  // DDPX_CORE_HOST_TOPOLOGY_H_
