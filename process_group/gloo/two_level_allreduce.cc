#include "process_group/gloo/two_level_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "process_group/gloo/gloo_backend.h"

namespace ddpx {
namespace {

absl::Status step(const char* what, const std::shared_ptr<Work>& work) {
  absl::Status s = work->wait();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("two-level allreduce, ", what, ": ", s.message()));
}

}  // namespace

TwoLevelAllreduce::TwoLevelAllreduce(std::shared_ptr<GlooBackend> local,
                                     std::shared_ptr<GlooBackend> cross)
    : local_(std::move(local)), cross_(std::move(cross)) {}

TwoLevelAllreduce::~TwoLevelAllreduce() = default;

absl::Status TwoLevelAllreduce::run(const Tensor& t, ReduceOp op,
                                    std::chrono::milliseconds timeout) {
  const int64_t local_size = local_->size();
  const int64_t n = t.numel();
  const size_t element = t.element_size();
  // Pieces of a multiple of L elements, so that only the last one may need
  // padding to L equal slices.
  const int64_t per_piece = std::max<int64_t>(
      local_size, kPieceBytes / static_cast<int64_t>(element) / local_size * local_size);
  const int64_t pieces = (n + per_piece - 1) / per_piece;
  const int64_t last = n - (pieces - 1) * per_piece;
  const int64_t last_slice = (last + local_size - 1) / local_size;
  const int64_t last_padded = last_slice * local_size;
  // Scratch: every piece's own slice, then the padded copy of the last piece
  // when it does not divide into L slices.
  const int64_t slices_elements = (pieces - 1) * (per_piece / local_size) + last_slice;
  const int64_t scratch_elements = slices_elements + (last_padded != last ? last_padded : 0);
  const int64_t scratch_bytes = scratch_elements * static_cast<int64_t>(element);
  if (!scratch_.defined() || scratch_.numel() < scratch_bytes) {
    scratch_ = Tensor::zeros({scratch_bytes}, DType::kUInt8);
  }
  auto* base = static_cast<uint8_t*>(t.data());
  auto* scratch = static_cast<uint8_t*>(scratch_.data());
  std::vector<Tensor> whole(pieces), mine(pieces);
  int64_t slice_offset = 0;
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t length = p + 1 < pieces ? per_piece : last;
    const int64_t slice = (length + local_size - 1) / local_size;
    void* in_place = base + p * per_piece * element;
    if (slice * local_size == length) {
      whole[p] = Tensor::from_blob(in_place, {length}, t.dtype());
    } else {  // the padding's values are reduced with each other only, and dropped
      uint8_t* padded = scratch + slices_elements * element;
      memcpy(padded, in_place, length * element);
      memset(padded + length * element, 0, (slice * local_size - length) * element);
      whole[p] = Tensor::from_blob(padded, {slice * local_size}, t.dtype());
    }
    mine[p] = Tensor::from_blob(scratch + slice_offset * element, {slice}, t.dtype());
    slice_offset += slice;
  }
  const ReduceOp reduce = op == ReduceOp::AVG ? ReduceOp::SUM : op;
  ReduceScatterOptions scatter;
  scatter.op = reduce;
  scatter.timeout = timeout;
  AllreduceOptions across;
  across.op = reduce;
  across.timeout = timeout;
  AllgatherOptions gather;
  gather.timeout = timeout;

  // Every rank issues the same ops on each subgroup in the same order (all
  // reduce-scatters, then piece by piece the cross-host allreduces, then the
  // allgathers), so the subgroups' sequence numbers agree; piece p+1's
  // reduce-scatter and piece p-1's allgather run inside the host while piece
  // p crosses the uplink.
  std::vector<std::shared_ptr<Work>> scattered(pieces), crossed(pieces), gathered(pieces);
  for (int64_t p = 0; p < pieces; ++p) {
    scattered[p] = local_->reduce_scatter_tensor(mine[p], whole[p], scatter);
  }
  absl::Status status;
  int64_t issued_cross = 0, issued_gather = 0;
  for (; issued_cross < pieces && status.ok(); ++issued_cross) {
    status = step("reduce-scatter inside the host", scattered[issued_cross]);
    if (status.ok()) crossed[issued_cross] = cross_->allreduce({mine[issued_cross]}, across);
  }
  for (; issued_gather < pieces && status.ok(); ++issued_gather) {
    status = step("allreduce across hosts", crossed[issued_gather]);
    if (status.ok()) {
      gathered[issued_gather] =
          local_->allgather_into_tensor(whole[issued_gather], mine[issued_gather], gather);
    }
  }
  // Wait for everything issued, also after a failure: the ops write into
  // `t` and the scratch.
  for (auto* works : {&scattered, &crossed, &gathered}) {
    for (auto& work : *works) {
      if (work == nullptr) continue;
      absl::Status s = step(works == &scattered  ? "reduce-scatter inside the host"
                            : works == &crossed ? "allreduce across hosts"
                                                : "allgather inside the host",
                            work);
      if (status.ok()) status = s;
    }
  }
  if (!status.ok()) return status;
  if (last_padded != last) {
    memcpy(base + (pieces - 1) * per_piece * element, whole[pieces - 1].data(), last * element);
  }
  return absl::OkStatus();
}

}  // namespace ddpx
