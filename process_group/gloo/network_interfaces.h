// The host's network interfaces, for binding to the one a user names
// (DDPX_GLOO_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, a trainer's --iface).
#ifndef DDPX_PROCESS_GROUP_GLOO_NETWORK_INTERFACES_H_
#define DDPX_PROCESS_GROUP_GLOO_NETWORK_INTERFACES_H_

#include <string>

#include "absl/status/statusor.h"

namespace ddpx {

// The first IPv4 address of interface `name` (else its first IPv6 one).
// An unknown name, or one without an address, is an error that lists the
// interfaces that have one ("lo 127.0.0.1, eth0 10.0.0.2").
absl::StatusOr<std::string> interface_address(const std::string& name);

// "lo 127.0.0.1, eth0 10.0.0.2": every interface with an address.
std::string describe_interfaces();

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_NETWORK_INTERFACES_H_
