#include "process_group/gloo/gloo_options.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"

namespace ddpx {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// True when `host` resolves to an address a socket can bind.
bool can_bind(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  bool ok = false;
  for (addrinfo* a = result; a != nullptr && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(result);
  return ok;
}

}  // namespace

std::string default_gloo_hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0' &&
      can_bind(name)) {
    return name;
  }
  return "127.0.0.1";
}

absl::StatusOr<GlooOptions> GlooOptions::from_env() {
  GlooOptions options;
  // PyTorch users set GLOO_SOCKET_IFNAME (a comma-separated list there: one
  // Gloo device each); a group here binds one interface, the first.
  options.interface = env_or_empty("DDPX_GLOO_SOCKET_IFNAME");
  if (options.interface.empty()) {
    const std::string torch_names = env_or_empty("GLOO_SOCKET_IFNAME");
    options.interface = torch_names.substr(0, torch_names.find(','));
  }
  options.hostname = env_or_empty("DDPX_GLOO_HOSTNAME");
  std::string workers = env_or_empty("DDPX_GLOO_NUM_WORKERS");
  if (!workers.empty()) {
    int n = 0;
    if (!absl::SimpleAtoi(workers, &n) || n < 1 || n > 64) {
      return absl::InvalidArgumentError(
          "DDPX_GLOO_NUM_WORKERS must be an integer in [1, 64], got '" +
          workers + "'");
    }
    options.num_workers = n;
  }
  std::string algorithm = env_or_empty("DDPX_GLOO_ALLREDUCE_ALGORITHM");
  if (!algorithm.empty()) {
    auto parsed = parse_allreduce_algorithm(algorithm);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError("DDPX_GLOO_ALLREDUCE_ALGORITHM: " +
                                        std::string(parsed.status().message()));
    }
    options.allreduce_algorithm = *parsed;
  }
  std::string sync_bytes = env_or_empty("DDPX_GLOO_SYNC_MAX_BYTES");
  if (!sync_bytes.empty()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(sync_bytes, &n) || n > kSyncPairMaxMessageBytes) {
      return absl::InvalidArgumentError(
          "DDPX_GLOO_SYNC_MAX_BYTES must be an integer in [0, " +
          std::to_string(kSyncPairMaxMessageBytes) + "], got '" + sync_bytes + "'");
    }
    options.sync_max_bytes = static_cast<size_t>(n);
  }
  std::string two_level = env_or_empty("DDPX_GLOO_TWO_LEVEL");
  if (two_level == "0" || two_level == "1") {
    options.two_level_allreduce = two_level == "1";
  } else if (!two_level.empty()) {
    return absl::InvalidArgumentError("DDPX_GLOO_TWO_LEVEL must be 0 (flat allreduce across "
                                      "hosts) or 1 (two levels), got '" + two_level + "'");
  }
  std::string shm = env_or_empty("DDPX_SHM");
  if (shm == "0") {
    options.shared_memory = false;
  } else if (shm == "1") {
    options.shared_memory = true;
  } else if (!shm.empty()) {
    return absl::InvalidArgumentError("DDPX_SHM must be 0 (TCP only) or 1 (shared memory "
                                      "between ranks on one host), got '" + shm + "'");
  }
  return options;
}

}  // namespace ddpx
