#include "process_group/nccl/comm_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace nccl {

std::string DeviceSet::key() const { return absl::StrJoin(devices, ","); }

absl::StatusOr<DeviceSet> device_set_of(OpType op, const TensorList& tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op_type_name(op), ": no tensors"));
  }
  DeviceSet set;
  std::set<int> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op_type_name(op), ": tensor ", i, " is undefined"));
    }
    if (!t.device().is_cuda()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op_type_name(op), ": the nccl backend needs CUDA tensors, tensor ", i, " is ",
          t.str()));
    }
    if (!seen.insert(t.device().index).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          op_type_name(op), ": tensor ", i, " is on ", t.device().str(),
          " like an earlier one; the nccl backend takes at most one tensor per device"));
    }
    set.devices.push_back(t.device().index);
  }
  return set;
}

absl::StatusOr<DeviceSet> single_device_of(OpType op, const TensorList& tensors) {
  absl::StatusOr<DeviceSet> set = device_set_of(op, tensors);
  if (!set.ok()) return set;
  if (set->devices.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op_type_name(op), ": the nccl backend takes one tensor (one device) per process, got ",
        set->devices.size()));
  }
  return set;
}

CommPlan collective_plan(const DeviceSet& devices, int rank, int size) {
  CommPlan plan;
  const int per_rank = static_cast<int>(devices.devices.size());
  plan.key = "devices:" + devices.key();
  plan.nranks = size * per_rank;
  for (int i = 0; i < per_rank; ++i) plan.nccl_ranks.push_back(rank * per_rank + i);
  plan.creates_unique_id = rank == 0;
  return plan;
}

CommPlan p2p_plan(int device, int rank, int peer) {
  CommPlan plan;
  const int low = std::min(rank, peer);
  const int high = std::max(rank, peer);
  plan.pair = absl::StrCat("p2p:", low, ":", high);
  plan.key = absl::StrCat(plan.pair, ":device:", device);
  plan.nranks = 2;
  plan.nccl_ranks = {rank == low ? 0 : 1};
  plan.creates_unique_id = rank == low;
  return plan;
}

std::string unique_id_store_key(const std::string& name, int64_t generation) {
  return absl::StrCat("nccl/", name, "/", generation, "/unique_id");
}

std::string rendezvous_store_key(const CommPlan& plan, int64_t collective_index,
                                 int64_t generation) {
  if (!plan.pair.empty()) return unique_id_store_key(plan.pair, generation);
  return unique_id_store_key(absl::StrCat("collective:", collective_index), 0);
}

absl::Status check_unique_id_bytes(const std::string& store_key, size_t got, size_t expected) {
  if (got == expected) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("nccl: store key ", store_key, " holds ", got,
                                          " bytes, an ncclUniqueId is ", expected,
                                          " (another program wrote it?)"));
}

int nccl_root(int root_rank, int root_tensor, size_t devices_per_rank) {
  return root_rank * static_cast<int>(devices_per_rank) + root_tensor;
}

}  // namespace nccl
}  // namespace ddpx
