// The nccl backend's ops built from grouped ncclSend/ncclRecv: gather,
// scatter, alltoall, alltoall_base, and plain send/recv.
#include "absl/strings/str_cat.h"
#include "cuda/nccl_check.h"
#include "process_group/nccl/alltoall_plan.h"
#include "process_group/nccl/nccl_backend.h"

namespace ddpx {
namespace nccl {
namespace {

absl::Status send_piece(const Tensor& t, int64_t offset, int64_t count, int peer, ncclComm_t comm,
                        cudaStream_t stream) {
  const char* data = static_cast<const char*>(t.data()) + offset * t.element_size();
  return DDPX_NCCL_CHECK(
      ncclSend(data, count, to_nccl(data_type(t.dtype())), peer, comm, stream));
}

absl::Status recv_piece(const Tensor& t, int64_t offset, int64_t count, int peer, ncclComm_t comm,
                        cudaStream_t stream) {
  char* data = static_cast<char*>(t.data()) + offset * t.element_size();
  return DDPX_NCCL_CHECK(
      ncclRecv(data, count, to_nccl(data_type(t.dtype())), peer, comm, stream));
}

}  // namespace

std::shared_ptr<Work> NcclBackend::gather(const std::vector<TensorList>& outputs,
                                          const TensorList& inputs, const GatherOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kGather, inputs);
  if (!devices.ok()) return FutureWork::failed(OpType::kGather, devices.status());
  const bool is_root = rank() == opts.root_rank;
  const Tensor& input = inputs[0];
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) -> absl::Status {
    if (!is_root) return send_piece(input, 0, input.numel(), opts.root_rank, comm.comm(i), stream);
    // The root sends to itself too: NCCL pairs it inside the group.
    if (absl::Status s = send_piece(input, 0, input.numel(), rank(), comm.comm(i), stream); !s.ok())
      return s;
    for (int r = 0; r < size(); ++r) {
      const Tensor& out = outputs[0][r];
      if (absl::Status s = recv_piece(out, 0, out.numel(), r, comm.comm(i), stream); !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  TensorList in_use = inputs;
  TensorList results;
  if (is_root) {
    in_use.insert(in_use.end(), outputs[0].begin(), outputs[0].end());
    results = outputs[0];
  }
  return run(OpType::kGather, collective_plan(*devices, rank(), size()), *devices,
             std::move(in_use), std::move(results), opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::scatter(const TensorList& outputs,
                                           const std::vector<TensorList>& inputs,
                                           const ScatterOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kScatter, outputs);
  if (!devices.ok()) return FutureWork::failed(OpType::kScatter, devices.status());
  const bool is_root = rank() == opts.root_rank;
  const Tensor& output = outputs[0];
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) -> absl::Status {
    if (is_root) {
      for (int r = 0; r < size(); ++r) {
        const Tensor& in = inputs[0][r];
        if (absl::Status s = send_piece(in, 0, in.numel(), r, comm.comm(i), stream); !s.ok())
          return s;
      }
    }
    return recv_piece(output, 0, output.numel(), opts.root_rank, comm.comm(i), stream);
  };
  TensorList in_use = outputs;
  if (is_root) in_use.insert(in_use.end(), inputs[0].begin(), inputs[0].end());
  return run(OpType::kScatter, collective_plan(*devices, rank(), size()), *devices,
             std::move(in_use), outputs, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::alltoall(const TensorList& outputs, const TensorList& inputs,
                                            const AllToAllOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kAlltoall, {inputs[0]});
  if (!devices.ok()) return FutureWork::failed(OpType::kAlltoall, devices.status());
  for (const TensorList* list : {&inputs, &outputs}) {
    for (const Tensor& t : *list) {
      if (t.device() != inputs[0].device()) {
        return FutureWork::failed(
            OpType::kAlltoall,
            absl::InvalidArgumentError(absl::StrCat("alltoall: ", t.str(), " is not on ",
                                                    inputs[0].device().str(),
                                                    " like input 0; one device per process")));
      }
    }
  }
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) -> absl::Status {
    for (int r = 0; r < size(); ++r) {
      if (absl::Status s = send_piece(inputs[r], 0, inputs[r].numel(), r, comm.comm(i), stream);
          !s.ok())
        return s;
      if (absl::Status s = recv_piece(outputs[r], 0, outputs[r].numel(), r, comm.comm(i), stream);
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  TensorList in_use = inputs;
  in_use.insert(in_use.end(), outputs.begin(), outputs.end());
  return run(OpType::kAlltoall, collective_plan(*devices, rank(), size()), *devices,
             std::move(in_use), outputs, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::alltoall_base(const Tensor& output, const Tensor& input,
                                                 const std::vector<int64_t>& output_split_sizes,
                                                 const std::vector<int64_t>& input_split_sizes,
                                                 const AllToAllOptions& opts) {
  absl::StatusOr<DeviceSet> devices = single_device_of(OpType::kAlltoallBase, {input});
  if (!devices.ok()) return FutureWork::failed(OpType::kAlltoallBase, devices.status());
  absl::StatusOr<AlltoallPlan> plan =
      alltoall_plan(output, input, output_split_sizes, input_split_sizes, size());
  if (!plan.ok()) return FutureWork::failed(OpType::kAlltoallBase, plan.status());
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) -> absl::Status {
    for (int r = 0; r < size(); ++r) {
      const Piece& out = plan->send[r];
      const Piece& in = plan->recv[r];
      if (absl::Status s = send_piece(input, out.offset, out.count, r, comm.comm(i), stream);
          !s.ok())
        return s;
      if (absl::Status s = recv_piece(output, in.offset, in.count, r, comm.comm(i), stream);
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  return run(OpType::kAlltoallBase, collective_plan(*devices, rank(), size()), *devices,
             {input, output}, {output}, opts.timeout, launch);
}

std::shared_ptr<Work> NcclBackend::point_to_point(OpType op, const TensorList& tensors, int peer,
                                                  const OpTimeout& timeout) {
  absl::StatusOr<DeviceSet> devices = single_device_of(op, tensors);
  if (!devices.ok()) return FutureWork::failed(op, devices.status());
  const CommPlan plan = p2p_plan(devices->devices[0], rank(), peer);
  const int nccl_peer = 1 - plan.nccl_ranks[0];
  const Tensor& t = tensors[0];
  Launch launch;
  launch.nccl = [&](size_t i, NcclComm& comm, cudaStream_t stream) {
    return op == OpType::kSend ? send_piece(t, 0, t.numel(), nccl_peer, comm.comm(i), stream)
                               : recv_piece(t, 0, t.numel(), nccl_peer, comm.comm(i), stream);
  };
  return run(op, plan, *devices, tensors, tensors, timeout, launch);
}

std::shared_ptr<Work> NcclBackend::send(const TensorList& tensors, int dst_rank,
                                        const SendRecvOptions& opts) {
  // NCCL has no tags: messages between a pair arrive in the order sent.
  return point_to_point(OpType::kSend, tensors, dst_rank, opts.timeout);
}

std::shared_ptr<Work> NcclBackend::recv(const TensorList& tensors, int src_rank,
                                        const SendRecvOptions& opts) {
  return point_to_point(OpType::kRecv, tensors, src_rank, opts.timeout);
}

std::shared_ptr<Work> NcclBackend::recv_anysource(const TensorList&, const SendRecvOptions&) {
  return FutureWork::failed(
      OpType::kRecvAnysource,
      absl::UnimplementedError("recv_anysource is not available on the nccl backend: NCCL "
                               "receives only from a named peer (use a gloo group)"));
}

}  // namespace nccl
}  // namespace ddpx
