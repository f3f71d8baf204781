#include "elastic/state_transfer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "elastic/kill_point.h"

namespace ddpx::elastic {

absl::Status broadcast_state(ProcessGroup& pg, int root, std::string* blob) {
  BroadcastOptions from;
  from.root_rank = root;
  Tensor size = Tensor::from_vector<int64_t>({static_cast<int64_t>(blob->size())});
  if (absl::Status s = pg.broadcast({size}, from)->wait(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("state transfer (size): ", s.message()));
  }
  kill_point("state/sized", pg.rank());
  const int64_t n = size.item(0);
  if (n < 0) return absl::InternalError(absl::StrCat("state transfer: size ", n));
  if (pg.rank() != root) blob->assign(static_cast<size_t>(n), '\0');
  if (n == 0) return absl::OkStatus();
  Tensor bytes = Tensor::from_blob(blob->data(), {n}, DType::kUInt8);
  if (absl::Status s = pg.broadcast({bytes}, from)->wait(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("state transfer (", n, " bytes): ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace ddpx::elastic
