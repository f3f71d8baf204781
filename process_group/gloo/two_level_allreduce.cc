#include "process_group/gloo/two_level_allreduce.h"

#include <vector>

#include "process_group/gloo/gloo_backend.h"
#include "core/piece_layout.h"
#include "core/work.h"

namespace ddpx {
namespace {

constexpr char kAlgorithm[] = "two-level allreduce";

}  // namespace

TwoLevelAllreduce::TwoLevelAllreduce(std::shared_ptr<GlooBackend> local,
                                     std::shared_ptr<GlooBackend> cross)
    : local_(std::move(local)), cross_(std::move(cross)) {}

TwoLevelAllreduce::~TwoLevelAllreduce() = default;

void TwoLevelAllreduce::abort(const absl::Status& why) {
  local_->abort(why);
  cross_->abort(why);
}

absl::Status TwoLevelAllreduce::run(const Tensor& t, ReduceOp op,
                                    std::chrono::milliseconds timeout) {
  const PieceLayout layout(t.numel(), static_cast<int64_t>(t.element_size()), kPieceBytes,
                           local_->size());
  const int64_t pieces = layout.pieces();
  const std::vector<PieceLayout::Piece> placed = layout.place(t, scratch_, /*own_slices=*/true);
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
    scattered[p] = local_->reduce_scatter_tensor(placed[p].mine, placed[p].whole, scatter);
  }
  absl::Status status;
  int64_t issued_cross = 0, issued_gather = 0;
  for (; issued_cross < pieces && status.ok(); ++issued_cross) {
    status = wait_step(scattered[issued_cross], kAlgorithm, "reduce-scatter inside the host");
    if (status.ok()) crossed[issued_cross] = cross_->allreduce({placed[issued_cross].mine}, across);
  }
  for (; issued_gather < pieces && status.ok(); ++issued_gather) {
    status = wait_step(crossed[issued_gather], kAlgorithm, "allreduce across hosts");
    if (status.ok()) {
      gathered[issued_gather] = local_->allgather_into_tensor(
          placed[issued_gather].whole, placed[issued_gather].mine, gather);
    }
  }
  // Wait for everything issued, also after a failure: the ops write into
  // `t` and the scratch.
  for (auto* works : {&scattered, &crossed, &gathered}) {
    for (auto& work : *works) {
      if (work == nullptr) continue;
      absl::Status s = wait_step(work, kAlgorithm,
                                 works == &scattered  ? "reduce-scatter inside the host"
                                 : works == &crossed ? "allreduce across hosts"
                                                     : "allgather inside the host");
      if (status.ok()) status = s;
    }
  }
  if (!status.ok()) return status;
  layout.copy_back(t, placed);
  return absl::OkStatus();
}

}  // namespace ddpx
