// The nccl backend's collectives (point-to-point based ones: nccl_p2p.cc).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cuda/check.h"
#include "cuda/nccl_check.h"
#include "process_group/nccl/nccl_backend.h"

namespace ddpx {
namespace nccl {
namespace {

absl::Status copy_on_stream(void* dst, const void* src, size_t nbytes, cudaStream_t stream) {
  if (nbytes == 0) return absl::OkStatus();
  return DDPX_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
}

char* bytes_at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data()) + elements * static_cast<int64_t>(t.element_size());
}

}  // namespace

std::shared_ptr<Work> NcclBackend::allreduce(const TensorList& tensors,
                                             const AllreduceOptions& opts) {
  absl::StatusOr<DeviceSet> devices = device_set_of(OpType::kAllreduce, tensors);
  if (!devices.ok()) return FutureWork::failed(OpType::kAllreduce, devices.status());
  absl::StatusOr<RedOp> op = reduce_op(opts.op, tensors[0].dtype());
  if (!op.ok()) return FutureWork::failed(OpType::kAllreduce, op.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    const Tensor& t = tensors[i];
    return DDPX_NCCL_CHECK(ncclAllReduce(t.data(), t.data(), t.numel(),
                                         to_nccl(data_type(t.dtype())), to_nccl(*op),
                                         comm.comm(i), stream));
  };
  return run(OpType::kAllreduce, collective_plan(*devices, rank(), size()), *devices, tensors,
             tensors, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::allreduce_coalesced(const TensorList& tensors,
                                                       const AllreduceOptions& opts) {
  // All on one device; one NCCL group makes them one launch.
  if (tensors.empty()) {
    return FutureWork::failed(OpType::kAllreduceCoalesced,
                              absl::InvalidArgumentError("allreduce_coalesced: no tensors"));
  }
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kAllreduceCoalesced, {tensors[0]});
  if (!devices.ok()) return FutureWork::failed(OpType::kAllreduceCoalesced, devices.status());
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].device() != tensors[0].device()) {
      return FutureWork::failed(
          OpType::kAllreduceCoalesced,
          absl::InvalidArgumentError(absl::StrCat(
              "allreduce_coalesced: tensor ", i, " is ", tensors[i].str(),
              ", tensor 0 is on ", tensors[0].device().str(), "; coalesced tensors share a device")));
    }
  }
  absl::StatusOr<RedOp> op = reduce_op(opts.op, tensors[0].dtype());
  if (!op.ok()) return FutureWork::failed(OpType::kAllreduceCoalesced, op.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) -> absl::Status {
    for (const Tensor& t : tensors) {
      DDPX_NCCL_RETURN_IF_ERROR(ncclAllReduce(t.data(), t.data(), t.numel(),
                                              to_nccl(data_type(t.dtype())), to_nccl(*op),
                                              comm.comm(i), stream));
    }
    return absl::OkStatus();
  };
  return run(OpType::kAllreduceCoalesced, collective_plan(*devices, rank(), size()), *devices,
             tensors, tensors, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::broadcast(const TensorList& tensors,
                                             const BroadcastOptions& opts) {
  absl::StatusOr<DeviceSet> devices = device_set_of(OpType::kBroadcast, tensors);
  if (!devices.ok()) return FutureWork::failed(OpType::kBroadcast, devices.status());
  const int root = nccl_root(opts.root_rank, opts.root_tensor, tensors.size());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    const Tensor& t = tensors[i];
    return DDPX_NCCL_CHECK(ncclBroadcast(t.data(), t.data(), t.numel(),
                                         to_nccl(data_type(t.dtype())), root, comm.comm(i),
                                         stream));
  };
  return run(OpType::kBroadcast, collective_plan(*devices, rank(), size()), *devices, tensors,
             tensors, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::reduce(const TensorList& tensors, const ReduceOptions& opts) {
  absl::StatusOr<DeviceSet> devices = device_set_of(OpType::kReduce, tensors);
  if (!devices.ok()) return FutureWork::failed(OpType::kReduce, devices.status());
  absl::StatusOr<RedOp> op = reduce_op(opts.op, tensors[0].dtype());
  if (!op.ok()) return FutureWork::failed(OpType::kReduce, op.status());
  const int root = nccl_root(opts.root_rank, opts.root_tensor, tensors.size());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    const Tensor& t = tensors[i];
    return DDPX_NCCL_CHECK(ncclReduce(t.data(), t.data(), t.numel(),
                                      to_nccl(data_type(t.dtype())), to_nccl(*op), root,
                                      comm.comm(i), stream));
  };
  return run(OpType::kReduce, collective_plan(*devices, rank(), size()), *devices, tensors,
             tensors, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::allgather(const std::vector<TensorList>& outputs,
                                             const TensorList& inputs,
                                             const AllgatherOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kAllgather, inputs);
  if (!devices.ok()) return FutureWork::failed(OpType::kAllgather, devices.status());
  const Tensor& input = inputs[0];
  // NCCL gathers into one flat buffer; the copies out run on the same stream.
  absl::StatusOr<Tensor> flat =
      Tensor::empty({size() * input.numel()}, input.dtype(), input.device());
  if (!flat.ok()) return FutureWork::failed(OpType::kAllgather, flat.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return DDPX_NCCL_CHECK(ncclAllGather(input.data(), flat->data(), input.numel(),
                                         to_nccl(data_type(input.dtype())), comm.comm(i),
                                         stream));
  };
  launch.after = [&](size_t, cudaStream_t stream) -> absl::Status {
    for (int r = 0; r < size(); ++r) {
      const Tensor& out = outputs[0][r];
      if (absl::Status s = copy_on_stream(out.data(), bytes_at(*flat, r * input.numel()),
                                          out.nbytes(), stream);
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  TensorList in_use = {input, *flat};
  in_use.insert(in_use.end(), outputs[0].begin(), outputs[0].end());
  return run(OpType::kAllgather, collective_plan(*devices, rank(), size()), *devices,
             std::move(in_use), outputs[0], opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::allgather_into_tensor(const Tensor& output,
                                                         const Tensor& input,
                                                         const AllgatherOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kAllgatherIntoTensor, {input});
  if (!devices.ok()) return FutureWork::failed(OpType::kAllgatherIntoTensor, devices.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return DDPX_NCCL_CHECK(ncclAllGather(input.data(), output.data(), input.numel(),
                                         to_nccl(data_type(input.dtype())), comm.comm(i),
                                         stream));
  };
  return run(OpType::kAllgatherIntoTensor, collective_plan(*devices, rank(), size()), *devices,
             {input, output}, {output}, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::reduce_scatter(const TensorList& outputs,
                                                  const std::vector<TensorList>& inputs,
                                                  const ReduceScatterOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kReduceScatter, outputs);
  if (!devices.ok()) return FutureWork::failed(OpType::kReduceScatter, devices.status());
  const Tensor& output = outputs[0];
  absl::StatusOr<RedOp> op = reduce_op(opts.op, output.dtype());
  if (!op.ok()) return FutureWork::failed(OpType::kReduceScatter, op.status());
  absl::StatusOr<Tensor> flat =
      Tensor::empty({size() * output.numel()}, output.dtype(), output.device());
  if (!flat.ok()) return FutureWork::failed(OpType::kReduceScatter, flat.status());
  Launch launch;
  launch.before = [&](size_t, cudaStream_t stream) -> absl::Status {
    for (int r = 0; r < size(); ++r) {
      const Tensor& in = inputs[0][r];
      if (absl::Status s = copy_on_stream(bytes_at(*flat, r * output.numel()), in.data(),
                                          in.nbytes(), stream);
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return DDPX_NCCL_CHECK(ncclReduceScatter(flat->data(), output.data(), output.numel(),
                                             to_nccl(data_type(output.dtype())), to_nccl(*op),
                                             comm.comm(i), stream));
  };
  TensorList in_use = {output, *flat};
  in_use.insert(in_use.end(), inputs[0].begin(), inputs[0].end());
  return run(OpType::kReduceScatter, collective_plan(*devices, rank(), size()), *devices,
             std::move(in_use), {output}, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::reduce_scatter_tensor(const Tensor& output,
                                                         const Tensor& input,
                                                         const ReduceScatterOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kReduceScatterTensor, {output});
  if (!devices.ok()) return FutureWork::failed(OpType::kReduceScatterTensor, devices.status());
  absl::StatusOr<RedOp> op = reduce_op(opts.op, output.dtype());
  if (!op.ok()) return FutureWork::failed(OpType::kReduceScatterTensor, op.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return DDPX_NCCL_CHECK(ncclReduceScatter(input.data(), output.data(), output.numel(),
                                             to_nccl(data_type(output.dtype())), to_nccl(*op),
                                             comm.comm(i), stream));
  };
  return run(OpType::kReduceScatterTensor, collective_plan(*devices, rank(), size()), *devices,
             {input, output}, {output}, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::barrier(const BarrierOptions& opts) {
  // As torch does: an allreduce of one element on this rank's device,
  // and wait() blocks the host.
  int device;
  {
    std::lock_guard<std::mutex> lock(mu_);
    device = last_device_;
  }
  if (device < 0) device = rank() % std::max(1, cuda_device_count());
  absl::StatusOr<Tensor> one = Tensor::empty({1}, DType::kFloat32, Device::cuda(device));
  if (!one.ok()) return FutureWork::failed(OpType::kBarrier, one.status());
  DeviceSet devices{{device}};
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return DDPX_NCCL_CHECK(ncclAllReduce(one->data(), one->data(), 1, ncclFloat32, ncclSum,
                                         comm.comm(i), stream));
  };
  return run(OpType::kBarrier, collective_plan(devices, rank(), size()), devices, {*one}, {},
             opts.timeout, launch, /*blocking_wait=*/true);
}

std::shared_ptr<Work> NcclBackend::monitored_barrier(const BarrierOptions&, bool) {
  return FutureWork::failed(
      OpType::kMonitoredBarrier,
      absl::UnimplementedError("monitored_barrier is not available on the nccl backend (as in "
                               "torch): call it on a gloo group"));
}

}  // namespace nccl
}  // namespace ddpx
