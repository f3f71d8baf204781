// One NCCL communicator per device of a device set, each with its own
// non-blocking stream, created from an ncclUniqueId shared through the store
// (comm_plan.h says who publishes it and under which key).
#ifndef DDPX_PROCESS_GROUP_NCCL_NCCL_COMM_H_
#define DDPX_PROCESS_GROUP_NCCL_NCCL_COMM_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/stream.h"
#include "process_group/nccl/comm_plan.h"
#include "process_group/nccl/nccl_types.h"
#include "store/store.h"

namespace ddpx {
namespace nccl {

class NcclComm {
 public:
  // Blocks until the unique id is in the store (the store's timeout) and
  // every member has joined.
  // `store_key`: where the unique id is published (rendezvous_store_key).
  static absl::StatusOr<std::shared_ptr<NcclComm>> create(Store& store, const CommPlan& plan,
                                                          const std::string& store_key,
                                                          const std::vector<int>& devices,
                                                          bool high_priority_stream);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const std::string& key() const { return key_; }
  size_t num_devices() const { return devices_.size(); }
  int device(size_t i) const { return devices_[i]; }
  ncclComm_t comm(size_t i) const { return comms_[i]; }
  cudaStream_t stream(size_t i) const { return streams_[i].get(); }
  int nccl_rank(size_t i) const { return nccl_ranks_[i]; }
  int nranks() const { return nranks_; }
  uint64_t next_sequence() { return ++sequence_; }

  // The first asynchronous error any member communicator reports.
  absl::Status async_error();
  // ncclCommAbort on every member (once); in-flight NCCL kernels return.
  void abort();
  bool is_aborted() const { return aborted_; }

 private:
  NcclComm() = default;

  std::string key_;
  int nranks_ = 0;
  std::vector<int> devices_;
  std::vector<int> nccl_ranks_;
  std::vector<ncclComm_t> comms_;
  std::vector<CudaStream> streams_;
  std::atomic<uint64_t> sequence_{0};
  std::mutex abort_mu_;
  std::atomic<bool> aborted_{false};
};

inline ncclDataType_t to_nccl(DataType t) { return static_cast<ncclDataType_t>(t); }
inline ncclRedOp_t to_nccl(RedOp op) { return static_cast<ncclRedOp_t>(op); }

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_NCCL_COMM_H_
