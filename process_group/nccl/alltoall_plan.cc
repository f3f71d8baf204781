#include "process_group/nccl/alltoall_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace nccl {
namespace {

absl::StatusOr<std::vector<Piece>> pieces(const char* what, const Tensor& t,
                                          const std::vector<int64_t>& splits, int size) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row_elems = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> rows_per_peer = splits;
  if (rows_per_peer.empty()) {
    if (rows % size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoall_base: ", what, " ", t.str(), " has ", rows,
          " rows, not divisible into ", size, " equal splits"));
    }
    rows_per_peer.assign(size, rows / size);
  }
  if (static_cast<int>(rows_per_peer.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alltoall_base: ", what, " split sizes [", absl::StrJoin(rows_per_peer, ", "),
        "] need one entry per rank (", size, ")"));
  }
  std::vector<Piece> out;
  int64_t row = 0;
  for (int64_t r : rows_per_peer) {
    if (r < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoall_base: ", what, " split sizes [", absl::StrJoin(rows_per_peer, ", "),
          "] contain a negative size"));
    }
    out.push_back(Piece{row * row_elems, r * row_elems});
    row += r;
  }
  if (row != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alltoall_base: ", what, " split sizes [", absl::StrJoin(rows_per_peer, ", "),
        "] add up to ", row, " rows but ", t.str(), " has ", rows));
  }
  return out;
}

}  // namespace

absl::StatusOr<AlltoallPlan> alltoall_plan(const Tensor& output, const Tensor& input,
                                           const std::vector<int64_t>& output_split_sizes,
                                           const std::vector<int64_t>& input_split_sizes,
                                           int size) {
  absl::StatusOr<std::vector<Piece>> send = pieces("input", input, input_split_sizes, size);
  if (!send.ok()) return send.status();
  absl::StatusOr<std::vector<Piece>> recv = pieces("output", output, output_split_sizes, size);
  if (!recv.ok()) return recv.status();
  return AlltoallPlan{std::move(*send), std::move(*recv)};
}

}  // namespace nccl
}  // namespace ddpx
