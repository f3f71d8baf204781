#include "hooks/hook_stats.h"

#include "absl/strings/str_format.h"

namespace ddpx {

double HookStats::compression_ratio() const {
  if (wire_bytes == 0) return 1.0;
  return static_cast<double>(baseline_wire_bytes) / static_cast<double>(wire_bytes);
}

std::string HookStats::str() const {
  return absl::StrFormat("calls=%d input=%.1fMB payload=%.1fMB wire=%.1fMB ratio=%.2f",
                         calls, input_bytes / 1e6, payload_bytes / 1e6,
                         wire_bytes / 1e6, compression_ratio());
}

void HookStatsCounter::add_call(uint64_t input_bytes, uint64_t baseline_wire_bytes) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  input_.fetch_add(input_bytes, std::memory_order_relaxed);
  baseline_.fetch_add(baseline_wire_bytes, std::memory_order_relaxed);
}

void HookStatsCounter::add_traffic(uint64_t payload_bytes, uint64_t wire_bytes) {
  payload_.fetch_add(payload_bytes, std::memory_order_relaxed);
  wire_.fetch_add(wire_bytes, std::memory_order_relaxed);
}

HookStats HookStatsCounter::snapshot() const {
  HookStats s;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.input_bytes = input_.load(std::memory_order_relaxed);
  s.payload_bytes = payload_.load(std::memory_order_relaxed);
  s.wire_bytes = wire_.load(std::memory_order_relaxed);
  s.baseline_wire_bytes = baseline_.load(std::memory_order_relaxed);
  return s;
}

uint64_t allreduce_wire_bytes(uint64_t buffer_bytes, int world) {
  if (world <= 1) return 0;
  return 2 * buffer_bytes * static_cast<uint64_t>(world - 1) / static_cast<uint64_t>(world);
}

uint64_t alltoall_wire_bytes(uint64_t total_bytes, int world) {
  if (world <= 1) return 0;
  return total_bytes * static_cast<uint64_t>(world - 1) / static_cast<uint64_t>(world);
}

uint64_t allgather_wire_bytes(uint64_t input_bytes, int world) {
  if (world <= 1) return 0;
  return input_bytes * static_cast<uint64_t>(world - 1);
}

HookStats comm_hook_stats(const CommHook& hook) {
  const auto* counting = dynamic_cast<const CountingHook*>(&hook);
  return counting ? counting->stats() : HookStats{};
}

}  // namespace ddpx
