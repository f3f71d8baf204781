#include "examples/trainer/elastic_state.h"

#include <cstring>
#include <sstream>
#include <type_traits>

namespace ddpx::trainer {
namespace {

constexpr char kStateMagic[8] = {'D', 'D', 'P', 'X', 'E', 'L', 'S', 'T'};
// Sent as its bytes: every member runs the same binary on the same host
// architecture (the job's settings are checked at rendezvous).
static_assert(std::is_trivially_copyable_v<ElasticPosition>);

}  // namespace

absl::StatusOr<std::string> save_elastic_state(const ElasticPosition& position,
                                               const TrainState& state,
                                               const std::string& hook_state) {
  std::ostringstream out;
  out.write(kStateMagic, sizeof(kStateMagic));
  out.write(reinterpret_cast<const char*>(&position), sizeof(position));
  if (absl::Status s = state.save_model(out); !s.ok()) return s;
  if (absl::Status s = state.save_optimizer(out); !s.ok()) return s;
  const uint64_t hook_size = hook_state.size();
  out.write(reinterpret_cast<const char*>(&hook_size), sizeof(hook_size));
  out.write(hook_state.data(), static_cast<std::streamsize>(hook_state.size()));
  return out.str();
}

absl::Status load_elastic_state(const std::string& blob, ElasticPosition* position,
                                TrainState& state, std::string* hook_state) {
  std::istringstream in(blob);
  char magic[sizeof(kStateMagic)] = {};
  in.read(magic, sizeof(magic));
  if (!in || memcmp(magic, kStateMagic, sizeof(magic)) != 0) {
    return absl::DataLossError("elastic state transfer: the received state does not start "
                               "with DDPXELST");
  }
  in.read(reinterpret_cast<char*>(position), sizeof(*position));
  if (!in) return absl::DataLossError("elastic state transfer: the position is cut short");
  if (absl::Status s = state.load_model(in); !s.ok()) return s;
  if (absl::Status s = state.load_optimizer(in); !s.ok()) return s;
  uint64_t hook_size = 0;
  in.read(reinterpret_cast<char*>(&hook_size), sizeof(hook_size));
  const std::streamoff at = in.tellg();
  if (!in || at < 0 || hook_size > blob.size() - static_cast<uint64_t>(at)) {
    return absl::DataLossError("elastic state transfer: the hook state is cut short");
  }
  if (hook_state != nullptr) hook_state->assign(blob, static_cast<size_t>(at), hook_size);
  in.seekg(static_cast<std::streamoff>(hook_size), std::ios::cur);
  if (in.peek() != EOF) {
    return absl::DataLossError("elastic state transfer: bytes left after the hook state");
  }
  return absl::OkStatus();
}

}  // namespace ddpx::trainer
