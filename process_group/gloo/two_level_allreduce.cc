#include "process_group/gloo/two_level_allreduce.h"

#include <cstring>

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
  const int64_t slice = (n + local_size - 1) / local_size;
  const int64_t padded = slice * local_size;
  const size_t element = t.element_size();
  if (!scratch_.defined() || scratch_.numel() < (padded + slice) * static_cast<int64_t>(element)) {
    scratch_ = Tensor::zeros({(padded + slice) * static_cast<int64_t>(element)}, DType::kUInt8);
  }
  // The message padded to L equal slices (the padding's values are reduced
  // with each other only, and dropped), and this rank's slice.
  Tensor whole = Tensor::from_blob(scratch_.data(), {padded}, t.dtype());
  Tensor mine = Tensor::from_blob(static_cast<uint8_t*>(scratch_.data()) + padded * element,
                                  {slice}, t.dtype());
  memcpy(whole.data(), t.data(), n * element);
  memset(static_cast<uint8_t*>(whole.data()) + n * element, 0, (padded - n) * element);
  const ReduceOp reduce = op == ReduceOp::AVG ? ReduceOp::SUM : op;

  ReduceScatterOptions scatter;
  scatter.op = reduce;
  scatter.timeout = timeout;
  absl::Status s = step("reduce-scatter inside the host",
                        local_->reduce_scatter_tensor(mine, whole, scatter));
  if (!s.ok()) return s;
  AllreduceOptions across;
  across.op = reduce;
  across.timeout = timeout;
  s = step("allreduce across hosts", cross_->allreduce({mine}, across));
  if (!s.ok()) return s;
  AllgatherOptions gather;
  gather.timeout = timeout;
  s = step("allgather inside the host", local_->allgather_into_tensor(whole, mine, gather));
  if (!s.ok()) return s;
  memcpy(t.data(), whole.data(), n * element);
  return absl::OkStatus();
}

}  // namespace ddpx
