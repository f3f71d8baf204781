#include "process_group/gloo/network_interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace {

struct Address {
  std::string interface;
  std::string address;
  bool ipv4;
};

std::vector<Address> addresses() {
  std::vector<Address> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr);
    if (inet_ntop(family, raw, text, sizeof(text)) == nullptr) continue;
    out.push_back({a->ifa_name, text, family == AF_INET});
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::string describe_interfaces() {
  std::vector<std::string> parts;
  for (const Address& a : addresses()) parts.push_back(absl::StrCat(a.interface, " ", a.address));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::string> interface_address(const std::string& name) {
  std::string ipv6;
  for (const Address& a : addresses()) {
    if (a.interface != name) continue;
    if (a.ipv4) return a.address;
    if (ipv6.empty()) ipv6 = a.address;
  }
  if (!ipv6.empty()) return ipv6;
  return absl::InvalidArgumentError(absl::StrCat(
      "network interface '", name, "' does not exist on this host or has no address; "
      "interfaces with an address: ", describe_interfaces()));
}

}  // namespace ddpx
