// Which ranks share a host: the same machine, booted once, in the same IPC
// namespace. Two containers or network namespaces on one machine have their
// own hostname (UTS namespace) or IPC namespace, so they are different hosts
// here even though they share the kernel.
#ifndef DDPX_PROCESS_GROUP_RENDEZVOUS_HOST_IDENTITY_H_
#define DDPX_PROCESS_GROUP_RENDEZVOUS_HOST_IDENTITY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host_topology.h"
#include "store/store.h"

namespace ddpx {

// "<hostname>/<kernel boot id>/ipc:<IPC namespace inode>" for this process.
std::string host_identity();


// The topology of a group whose rank r has identities[r], seen from `rank`.
HostTopology host_topology(const std::vector<std::string>& identities, int rank);

// Every rank's identity (`own` here, usually host_identity()), exchanged
// through `store` under `key_prefix` (collective: every rank calls it).
absl::StatusOr<std::vector<std::string>> exchange_host_identities(Store& store,
                                                                  const std::string& key_prefix,
                                                                  int rank, int size,
                                                                  const std::string& own);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_RENDEZVOUS_HOST_IDENTITY_H_
