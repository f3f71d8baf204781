#include "process_group/nccl/nccl_comm.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cuda/check.h"
#include "cuda/nccl_check.h"

namespace ddpx {
namespace nccl {

// nccl_types.h mirrors these values so that CPU tests can check the tables.
static_assert(ncclInt8 == static_cast<int>(DataType::kInt8) &&
                  ncclUint8 == static_cast<int>(DataType::kUint8) &&
                  ncclInt32 == static_cast<int>(DataType::kInt32) &&
                  ncclUint32 == static_cast<int>(DataType::kUint32) &&
                  ncclInt64 == static_cast<int>(DataType::kInt64) &&
                  ncclUint64 == static_cast<int>(DataType::kUint64) &&
                  ncclFloat16 == static_cast<int>(DataType::kFloat16) &&
                  ncclFloat32 == static_cast<int>(DataType::kFloat32) &&
                  ncclFloat64 == static_cast<int>(DataType::kFloat64) &&
                  ncclBfloat16 == static_cast<int>(DataType::kBfloat16),
              "ncclDataType_t changed; update nccl_types.h");
static_assert(ncclSum == static_cast<int>(RedOp::kSum) &&
                  ncclProd == static_cast<int>(RedOp::kProd) &&
                  ncclMax == static_cast<int>(RedOp::kMax) &&
                  ncclMin == static_cast<int>(RedOp::kMin) &&
                  ncclAvg == static_cast<int>(RedOp::kAvg),
              "ncclRedOp_t changed; update nccl_types.h");

namespace {

absl::StatusOr<ncclUniqueId> exchange_unique_id(Store& store, const CommPlan& plan,
                                                const std::string& key) {
  ncclUniqueId id;
  if (plan.creates_unique_id) {
    DDPX_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    Bytes bytes(sizeof(id));
    memcpy(bytes.data(), &id, sizeof(id));
    if (absl::Status s = store.set(key, bytes); !s.ok()) return s;
    return id;
  }
  absl::StatusOr<Bytes> bytes = store.get(key);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("nccl: waiting for communicator ", plan.key,
                                     "'s unique id under ", key, ": ", bytes.status().message()));
  }
  if (absl::Status s = check_unique_id_bytes(key, bytes->size(), sizeof(id)); !s.ok()) return s;
  memcpy(&id, bytes->data(), sizeof(id));
  return id;
}

}  // namespace

absl::StatusOr<std::shared_ptr<NcclComm>> NcclComm::create(Store& store, const CommPlan& plan,
                                                           const std::string& store_key,
                                                           const std::vector<int>& devices,
                                                           bool high_priority_stream) {
  absl::StatusOr<ncclUniqueId> id = exchange_unique_id(store, plan, store_key);
  if (!id.ok()) return id.status();
  std::shared_ptr<NcclComm> c(new NcclComm());
  c->key_ = plan.key;
  c->nranks_ = plan.nranks;
  c->devices_ = devices;
  c->nccl_ranks_ = plan.nccl_ranks;
  c->comms_.assign(devices.size(), nullptr);
  for (int device : devices) {
    absl::StatusOr<CudaStream> stream = CudaStream::create(device, high_priority_stream ? -1 : 0);
    if (!stream.ok()) return stream.status();
    c->streams_.push_back(std::move(*stream));
  }
  // One thread joining for several devices must group the init calls.
  DDPX_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  absl::Status init;
  for (size_t i = 0; i < devices.size() && init.ok(); ++i) {
    DeviceGuard guard(devices[i]);
    init = guard.status();
    if (init.ok()) {
      init = DDPX_NCCL_CHECK(ncclCommInitRank(&c->comms_[i], plan.nranks, *id, plan.nccl_ranks[i]));
    }
  }
  absl::Status end = DDPX_NCCL_CHECK(ncclGroupEnd());
  if (!init.ok()) return init;
  if (!end.ok()) return end;
  return c;
}

NcclComm::~NcclComm() {
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (comms_[i] == nullptr) continue;
    DeviceGuard guard(devices_[i]);
    if (aborted_) continue;  // ncclCommAbort already freed it
    ncclCommDestroy(comms_[i]);
  }
}

absl::Status NcclComm::async_error() {
  if (aborted_) return absl::OkStatus();
  for (size_t i = 0; i < comms_.size(); ++i) {
    ncclResult_t async = ncclSuccess;
    absl::Status s = DDPX_NCCL_CHECK(ncclCommGetAsyncError(comms_[i], &async));
    if (!s.ok()) return s;
    if (async != ncclSuccess && async != ncclInProgress) {
      return absl::Status(
          nccl_result_status_code(async),
          absl::StrCat("communicator ", key_, " on cuda:", devices_[i], " (NCCL rank ",
                       nccl_ranks_[i], " of ", nranks_, ") reports ",
                       nccl_result_name(async), ": ", ncclGetErrorString(async)));
    }
  }
  return absl::OkStatus();
}

void NcclComm::abort() {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (aborted_) return;
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (comms_[i] == nullptr) continue;
    DeviceGuard guard(devices_[i]);
    ncclCommAbort(comms_[i]);
  }
  aborted_ = true;
}

}  // namespace nccl
}  // namespace ddpx
