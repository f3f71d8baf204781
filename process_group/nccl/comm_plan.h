// Which NCCL communicator an op runs on, and where its ncclUniqueId lives in
// the store. Plain C++ (tested on the CPU).
//
// Collectives use one communicator per device set: a process whose op names
// tensors on devices {0, 1} joins a communicator of size * 2 NCCL ranks, its
// i-th device being NCCL rank rank * 2 + i. Point-to-point ops use a
// two-rank communicator per pair of ranks (the other ranks never call them,
// so they cannot take part in creating one).
//
// The communicator's cache key names this process's devices ("devices:0");
// another rank may use other devices (rank r on cuda:r), so the store key
// that carries the ncclUniqueId cannot contain them. Like torch, collective
// communicators are numbered in creation order, which every rank shares
// because collectives are called in the same order on every rank:
//   nccl/collective:<n>/0/unique_id
// and a pair's communicator is named by the pair:
//   nccl/p2p:<low>:<high>/<generation>/unique_id
// (generation: how often this backend has created it). Rank 0, or the lower
// rank of a pair, creates the id. A subgroup has its own backend and, through
// new_group's PrefixStore, its own key space, so its communicators are its own.
#ifndef DDPX_PROCESS_GROUP_NCCL_COMM_PLAN_H_
#define DDPX_PROCESS_GROUP_NCCL_COMM_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/options.h"
#include "core/work.h"

namespace ddpx {
namespace nccl {

// The CUDA devices of an op's tensors, in tensor order, all distinct.
struct DeviceSet {
  std::vector<int> devices;
  // "0,1"
  std::string key() const;
};

// Every tensor defined and on CUDA, at most one tensor per device; the error
// names the op and the offending tensor.
absl::StatusOr<DeviceSet> device_set_of(OpType op, const TensorList& tensors);
// Ops that take one tensor per process (allgather, alltoall, gather, ...).
absl::StatusOr<DeviceSet> single_device_of(OpType op, const TensorList& tensors);

struct CommPlan {
  std::string key;                 // cache key: "devices:0,1" or "p2p:0:3:device:1"
  std::string pair;                // "p2p:0:3" for a pair; "" for a collective
  int nranks = 0;                  // NCCL ranks in the communicator
  std::vector<int> nccl_ranks;     // this process's NCCL rank per device
  bool creates_unique_id = false;  // whether this process publishes the id
};

CommPlan collective_plan(const DeviceSet& devices, int rank, int size);
// A two-rank communicator between `rank` and `peer` on one device.
CommPlan p2p_plan(int device, int rank, int peer);

std::string unique_id_store_key(const std::string& name, int64_t generation);
// The store key of a plan's unique id: collectives by their creation index
// (collective_index), pairs by the pair and generation.
std::string rendezvous_store_key(const CommPlan& plan, int64_t collective_index,
                                 int64_t generation);
// A value read from the store must be exactly one ncclUniqueId.
absl::Status check_unique_id_bytes(const std::string& store_key, size_t got, size_t expected);

// The NCCL rank of (process rank, tensor index) in a collective plan: for
// broadcast/reduce roots.
int nccl_root(int root_rank, int root_tensor, size_t devices_per_rank);

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_COMM_PLAN_H_
