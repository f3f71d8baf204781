#include "process_group/rendezvous/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ddpx {

std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat ipc {};
  const unsigned long long ipc_namespace =
      stat("/proc/self/ns/ipc", &ipc) == 0 ? static_cast<unsigned long long>(ipc.st_ino) : 0;
  return absl::StrCat(name, "/", boot_id, "/ipc:", ipc_namespace);
}

HostTopology host_topology(const std::vector<std::string>& identities, int rank) {
  HostTopology t;
  std::vector<std::string> hosts;
  for (int r = 0; r < static_cast<int>(identities.size()); ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), identities[r]);
    const int host = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) {
      hosts.push_back(identities[r]);
      t.ranks_by_host.emplace_back();
    }
    if (r == rank) {
      t.host_index = host;
      t.local_rank = static_cast<int>(t.ranks_by_host[host].size());
    }
    t.ranks_by_host[host].push_back(r);
  }
  t.host_count = static_cast<int>(hosts.size());
  t.local_size = static_cast<int>(t.ranks_by_host[t.host_index].size());
  return t;
}

absl::StatusOr<std::vector<std::string>> exchange_host_identities(Store& store,
                                                                  const std::string& key_prefix,
                                                                  int rank, int size,
                                                                  const std::string& own) {
  absl::Status s = store.set(absl::StrCat(key_prefix, rank), Bytes(own.begin(), own.end()));
  if (!s.ok()) return s;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat(key_prefix, r));
  absl::StatusOr<std::vector<Bytes>> values = store.multi_get(keys);
  if (!values.ok()) return values.status();
  std::vector<std::string> identities;
  for (const Bytes& v : *values) identities.emplace_back(v.begin(), v.end());
  return identities;
}

}  // namespace ddpx
