// The nccl backend's machinery: communicators, launching, the watchdog.
// The ops themselves are in nccl_collectives.cc and nccl_p2p.cc.
#include "process_group/nccl/nccl_backend.h"

#include "absl/strings/str_cat.h"
#include "cuda/nccl_check.h"
#include "process_group/nccl/nccl_work.h"

namespace ddpx {
namespace nccl {

absl::StatusOr<std::shared_ptr<NcclBackend>> NcclBackend::create(std::shared_ptr<Store> store,
                                                                 int rank, int size,
                                                                 NcclOptions options) {
  if (store == nullptr) return absl::InvalidArgumentError("nccl: no store given");
  if (size <= 0 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", rank, " is out of range for a group of size ", size));
  }
  if (absl::Status s = check_options(options); !s.ok()) return s;
  if (std::string why = cuda_unavailable_reason(); !why.empty()) {
    return absl::FailedPreconditionError("nccl backend needs a CUDA device: " + why);
  }
  return std::shared_ptr<NcclBackend>(new NcclBackend(std::move(store), rank, size, options));
}

NcclBackend::NcclBackend(std::shared_ptr<Store> store, int rank, int size, NcclOptions options)
    : Backend(rank, size), store_(std::move(store)), options_(options) {
  watchdog_ = std::make_unique<Watchdog>(
      options_.watchdog_poll,
      [this]() -> absl::Status {
        std::vector<std::shared_ptr<NcclComm>> comms;
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (auto& [key, c] : comms_) comms.push_back(c);
        }
        for (auto& c : comms) {
          if (absl::Status s = c->async_error(); !s.ok()) {
            return absl::Status(s.code(), absl::StrCat("rank ", this->rank(), ": ", s.message()));
          }
        }
        return absl::OkStatus();
      },
      [this](const absl::Status& why) {
        fprintf(stderr, "ddpx nccl (rank %d): aborting communicators: %s\n", this->rank(),
                why.ToString().c_str());
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [key, c] : comms_) c->abort();
      });
}

NcclBackend::~NcclBackend() {
  watchdog_.reset();  // fails what is pending before the communicators go
}

size_t NcclBackend::communicator_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_.size();
}

std::chrono::milliseconds NcclBackend::op_timeout(const OpTimeout& timeout) const {
  return timeout.value_or(options_.timeout);
}

absl::StatusOr<std::shared_ptr<NcclComm>> NcclBackend::communicator(const CommPlan& plan,
                                                                    const DeviceSet& devices) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = comms_.find(plan.key);
  if (it != comms_.end() && !it->second->is_aborted()) return it->second;
  const int64_t generation = plan.pair.empty() ? 0 : generations_[plan.pair]++;
  const int64_t collective_index = plan.pair.empty() ? collectives_created_++ : -1;
  const std::string store_key = rendezvous_store_key(plan, collective_index, generation);
  absl::StatusOr<std::shared_ptr<NcclComm>> comm = NcclComm::create(
      *store_, plan, store_key, devices.devices, options_.high_priority_stream);
  if (!comm.ok()) {
    return absl::Status(comm.status().code(),
                        absl::StrCat("nccl: creating communicator ", plan.key, " on rank ",
                                     rank(), ": ", comm.status().message()));
  }
  comms_[plan.key] = *comm;
  if (!devices.devices.empty()) last_device_ = devices.devices[0];
  return *comm;
}

std::shared_ptr<Work> NcclBackend::run(OpType op, const CommPlan& plan,
                                       const DeviceSet& devices, TensorList in_use,
                                       TensorList outputs, const OpTimeout& timeout,
                                       const Launch& launch, bool blocking_wait) {
  if (absl::Status aborted = watchdog_->aborted(); !aborted.ok()) {
    return FutureWork::failed(op, absl::AbortedError(absl::StrCat(
                                      "nccl: ", op_type_name(op), " on rank ", rank(),
                                      ": the communicators were aborted: ", aborted.message())));
  }
  absl::StatusOr<std::shared_ptr<NcclComm>> comm_or = communicator(plan, devices);
  if (!comm_or.ok()) return FutureWork::failed(op, comm_or.status());
  NcclComm& comm = **comm_or;
  const uint64_t sequence = comm.next_sequence();
  auto fail = [&](const absl::Status& s) {
    return FutureWork::failed(
        op, absl::Status(s.code(), absl::StrCat("nccl: ", op_type_name(op), " (seq ", sequence,
                                                ") on rank ", rank(), ": ", s.message())));
  };

  // The NCCL stream starts after the caller's stream has produced the inputs.
  for (size_t i = 0; i < comm.num_devices(); ++i) {
    DeviceGuard guard(comm.device(i));
    if (!guard.status().ok()) return fail(guard.status());
    absl::StatusOr<CudaEvent> ready = CudaEvent::create(comm.device(i));
    if (!ready.ok()) return fail(ready.status());
    if (absl::Status s = ready->record(current_stream(comm.device(i))); !s.ok()) return fail(s);
    if (absl::Status s = ready->block(comm.stream(i)); !s.ok()) return fail(s);
  }
  auto each_device = [&](const std::function<absl::Status(size_t)>& fn) -> absl::Status {
    for (size_t i = 0; i < comm.num_devices(); ++i) {
      DeviceGuard guard(comm.device(i));
      if (!guard.status().ok()) return guard.status();
      if (absl::Status s = fn(i); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  if (launch.before) {
    absl::Status s = each_device([&](size_t i) { return launch.before(i, comm.stream(i)); });
    if (!s.ok()) return fail(s);
  }
  {
    if (absl::Status s = DDPX_NCCL_CHECK(ncclGroupStart()); !s.ok()) return fail(s);
    absl::Status s = each_device([&](size_t i) { return launch.nccl(i, comm, comm.stream(i)); });
    absl::Status end = DDPX_NCCL_CHECK(ncclGroupEnd());
    if (!s.ok()) return fail(s);
    if (!end.ok()) return fail(end);
  }
  if (launch.after) {
    absl::Status s = each_device([&](size_t i) { return launch.after(i, comm.stream(i)); });
    if (!s.ok()) return fail(s);
  }
  std::vector<CudaEvent> done;
  for (size_t i = 0; i < comm.num_devices(); ++i) {
    absl::StatusOr<CudaEvent> e = CudaEvent::create(comm.device(i));
    if (!e.ok()) return fail(e.status());
    if (absl::Status s = e->record(comm.stream(i)); !s.ok()) return fail(s);
    done.push_back(std::move(*e));
  }
  auto work = std::make_shared<NcclWork>(op, *comm_or, std::move(done), std::move(in_use),
                                         std::move(outputs),
                                         blocking_wait || options_.blocking_wait);
  WatchedOp watched;
  watched.op_name = op_type_name(op);
  watched.sequence = sequence;
  watched.rank = rank();
  watched.communicator = comm.key();
  watched.timeout = op_timeout(timeout);
  watched.poll = [work] { return work->poll(); };
  watched.finish = [work](absl::Status s) { work->finish(std::move(s)); };
  watchdog_->watch(std::move(watched));
  return work;
}

}  // namespace nccl
}  // namespace ddpx
