#include "reducer/model_sync.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reducer/bucket_assignment.h"
#include "reducer/control_tensor.h"
#include "reducer/flat_buckets.h"

namespace ddpx {
namespace {

constexpr size_t kBroadcastBucketBytes = size_t{256} << 20;

// One parameter's layout as integers: requires_grad, dtype, device type,
// rank, dims... (the device index may differ across ranks: cuda:<rank>).
std::vector<int64_t> describe(const Parameter& p) {
  std::vector<int64_t> d = {p.requires_grad ? 1 : 0, static_cast<int64_t>(p.value.dtype()),
                            static_cast<int64_t>(p.value.device().type), p.value.dim()};
  for (int64_t s : p.value.shape()) d.push_back(s);
  return d;
}

std::string layout_str(const int64_t* d) {
  Shape shape(d + 4, d + 4 + d[3]);
  Device device;
  device.type = static_cast<Device::Type>(d[2]);
  std::string out = absl::StrCat(dtype_name(static_cast<DType>(d[1])), shape_str(shape),
                                 device.is_cpu() ? " on cpu" : " on cuda");
  if (d[0] == 0) absl::StrAppend(&out, " (frozen)");
  return out;
}

// Every rank's `input` (a CPU tensor), gathered on `device`
// (reducer/control_tensor.h): row r of the CPU result is rank r's.
absl::StatusOr<Tensor> allgather_int64(ProcessGroup& pg, const Tensor& input, Device device) {
  absl::StatusOr<Tensor> sent = control_on_device(input, device);
  if (!sent.ok()) return sent.status();
  std::vector<TensorList> outputs(1);
  for (int r = 0; r < pg.size(); ++r) {
    absl::StatusOr<Tensor> out = Tensor::empty(input.shape(), DType::kInt64, device);
    if (!out.ok()) return out.status();
    outputs[0].push_back(*out);
  }
  if (absl::Status s = pg.allgather(outputs, {*sent})->wait(); !s.ok()) return s;
  Tensor all = Tensor::zeros({pg.size(), input.numel()}, DType::kInt64);
  for (int r = 0; r < pg.size(); ++r) {
    if (absl::Status s = all.view(r * input.numel(), input.shape()).copy_from(outputs[0][r]); !s.ok()) {
      return s;
    }
  }
  return all;
}

}  // namespace

absl::Status verify_parameters_across_ranks(const ModelParameters& model, ProcessGroup& pg) {
  const Device device = control_device(model);
  std::vector<int64_t> meta;
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    std::vector<int64_t> d = describe(model.parameter(i));
    meta.insert(meta.end(), d.begin(), d.end());
  }
  // Round 1: how many parameters and how long each rank's description is.
  Tensor header = Tensor::from_vector<int64_t>(
      {static_cast<int64_t>(model.num_parameters()), static_cast<int64_t>(meta.size())});
  absl::StatusOr<Tensor> headers = allgather_int64(pg, header, device);
  if (!headers.ok()) {
    return absl::Status(headers.status().code(),
                        absl::StrCat("DDP parameter check: ", headers.status().message()));
  }
  const int64_t* h = headers->data_as<int64_t>();
  int64_t max_len = 1;
  for (int r = 0; r < pg.size(); ++r) {
    if (h[2 * r] != h[0]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "DDP: rank ", r, " registered ", h[2 * r], " parameters but rank 0 registered ", h[0],
          "; every rank must register the same parameters in the same order"));
    }
    max_len = std::max(max_len, h[2 * r + 1]);
  }
  // Round 2: the descriptions, padded to the longest.
  Tensor mine = Tensor::zeros({max_len}, DType::kInt64);
  std::copy(meta.begin(), meta.end(), mine.data_as<int64_t>());
  absl::StatusOr<Tensor> all = allgather_int64(pg, mine, device);
  if (!all.ok()) {
    return absl::Status(all.status().code(),
                        absl::StrCat("DDP parameter check: ", all.status().message()));
  }
  const int64_t* base = all->data_as<int64_t>();
  std::vector<int64_t> offset(pg.size(), 0);
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    const int64_t* ref = base + offset[0];
    for (int r = 0; r < pg.size(); ++r) {
      const int64_t* d = base + r * max_len + offset[r];
      bool same = d[3] == ref[3] && std::equal(d, d + 4 + d[3], ref);
      if (!same) {
        return absl::FailedPreconditionError(absl::StrCat(
            "DDP: parameter ", i, " ('", model.parameter(i).name, "') is ", layout_str(ref),
            " on rank 0 but ", layout_str(d), " on rank ", r,
            "; every rank must register the same parameters in the same order"));
      }
      offset[r] += 4 + d[3];
    }
  }
  return absl::OkStatus();
}

absl::Status broadcast_model_state(ModelParameters& model, ProcessGroup& pg, int root) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < model.num_parameters(); ++i) tensors.push_back(model.parameter(i).value);
  for (size_t i = 0; i < model.num_buffers(); ++i) tensors.push_back(model.buffer(i).value);
  if (tensors.empty()) return absl::OkStatus();
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::StatusOr<std::vector<BucketSpec>> specs =
      compute_bucket_assignment(gradient_specs(tensors), order, {kBroadcastBucketBytes});
  if (!specs.ok()) return specs.status();
  absl::StatusOr<std::vector<FlatBucket>> buckets = make_flat_buckets(*specs, tensors);
  if (!buckets.ok()) return buckets.status();
  BroadcastOptions opts;
  opts.root_rank = root;
  for (const FlatBucket& b : *buckets) {
    if (pg.rank() == root) {
      if (absl::Status s = copy_into_bucket(b, tensors); !s.ok()) return s;
    }
    if (absl::Status s = pg.broadcast({b.buffer}, opts)->wait(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("broadcasting model state from rank ", root,
                                                 ": ", s.message()));
    }
    if (absl::Status s = copy_out_of_bucket(b, tensors); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ddpx
