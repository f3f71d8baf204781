// Debug mode (DDPX_DISTRIBUTED_DEBUG=DETAIL, like TORCH_DISTRIBUTED_DEBUG):
// before each collective every rank publishes a fingerprint of the call (op,
// dtypes, shapes, root, reduce op) in the group's store under the
// collective's sequence number and compares it with everyone else's. A
// mismatch fails the call on every rank with a message naming the ranks and
// the fields that differ, where it would otherwise hang or silently mix
// unrelated data. A rank that never arrives is named when the timeout ends.
//
// It costs one store round trip per rank per collective: a debugging aid.
#ifndef DDPX_PROCESS_GROUP_FRONT_END_DEBUG_CHECK_H_
#define DDPX_PROCESS_GROUP_FRONT_END_DEBUG_CHECK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "process_group/tracing/flight_recorder.h"
#include "core/options.h"
#include "core/tensor.h"
#include "store/store.h"

namespace ddpx {

// True when DDPX_DISTRIBUTED_DEBUG is DETAIL (case-insensitive).
bool debug_detail_from_env();

// What must agree across ranks for one collective: ordered (name, value)
// pairs, e.g. {"op", "allreduce"}, {"shapes", "[[4], [4]]"}; and the same
// as plain data for the flight recorder (trace()). Point-to-point ops get one
// for the recorder only (peer(), tag()); they are never cross-checked.
//
// Every op builds one, but only debug mode reads its pairs: it keeps plain
// data (up to TraceOp::kMaxTensors tensors of up to kMaxInlineDims
// dimensions) and makes the text when asked, so that an op allocates nothing
// for it. Larger tensor lists are put into text at once.
class CollectiveFingerprint {
 public:
  static constexpr int kMaxInlineDims = 4;

  explicit CollectiveFingerprint(OpType op);
  CollectiveFingerprint& tensors(const std::vector<Tensor>& tensors);
  // Dtypes only, for ops whose shapes may legally differ (alltoall).
  CollectiveFingerprint& dtypes(const std::vector<Tensor>& tensors);
  CollectiveFingerprint& root(int root_rank);
  CollectiveFingerprint& reduce_op(ReduceOp op);
  // For the record only (not compared across ranks).
  CollectiveFingerprint& peer(int rank, int tag);

  OpType op() const { return op_; }
  const TraceOp& trace() const { return trace_; }
  std::vector<std::pair<std::string, std::string>> fields() const;
  // "name=value" lines; values never hold a newline.
  std::string encode() const;
  static std::vector<std::pair<std::string, std::string>> decode(
      const std::string& text);

 private:
  // Where a field's value comes from: its text, or the plain data below.
  enum class Source : uint8_t { kText, kOp, kDtypes, kShapes };
  struct Field {
    const char* name = nullptr;
    Source source = Source::kText;
    std::string text;  // for kText (short values only, or the rare long list)
  };
  void add(const char* name, Source source, std::string text = {}) {
    fields_.push_back(Field{name, source, std::move(text)});
  }
  std::string value_of(const Field& field) const;

  OpType op_;
  absl::InlinedVector<Field, 5> fields_;
  TraceOp trace_;
  bool traced_tensors_ = false;
  // The shapes of trace_'s tensors, when every one fits (kShapes).
  int8_t ndims_[TraceOp::kMaxTensors] = {};
  int64_t dims_[TraceOp::kMaxTensors][kMaxInlineDims] = {};
};

class DebugChecker {
 public:
  // `store` is the group's own (prefixed) store.
  DebugChecker(std::shared_ptr<Store> store, int rank, int size);

  // Publishes this rank's fingerprint for the next collective and waits up to
  // `timeout` for every rank's. Calls are numbered in the order they arrive,
  // so every rank must issue its collectives in the same order (as the
  // backends require anyway).
  absl::Status check(const CollectiveFingerprint& fingerprint,
                     std::chrono::milliseconds timeout);

 private:
  std::string key(uint64_t seq, const std::string& what) const;
  // Names each field whose value differs across ranks, and who holds what.
  absl::Status compare(const std::vector<Bytes>& all) const;
  void cleanup(uint64_t seq, const std::vector<std::string>& keys);

  std::shared_ptr<Store> store_;
  const int rank_;
  const int size_;
  std::mutex mu_;  // serializes check(): one sequence number at a time
  uint64_t next_seq_ = 0;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_FRONT_END_DEBUG_CHECK_H_
