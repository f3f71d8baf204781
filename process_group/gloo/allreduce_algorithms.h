// Gloo's allreduce algorithms behind one call, and the per-size choice among
// them.
//
// Gloo 0.5.0 ships two families: the unbound-buffer `gloo::allreduce`
// (ring by default, or bcube) that takes a tag and a per-call timeout, and
// the classic algorithm classes (AllreduceRing, AllreduceRingChunked,
// AllreduceHalvingDoubling, AllreduceBcube) built on pair-bound buffers,
// whose slots come from context->nextSlot() and which wait as long as their
// pairs allow (no per-call timeout). GlooBackend runs the classic ones only
// where that is safe: on sync pairs, whose sockets it gives each op's
// timeout (sync_pairs.h), of a context used by one thread in a fixed order
// on every rank (it pins each op to a worker that owns its context).
#ifndef DDPX_PROCESS_GROUP_GLOO_ALLREDUCE_ALGORITHMS_H_
#define DDPX_PROCESS_GROUP_GLOO_ALLREDUCE_ALGORITHMS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/options.h"

namespace gloo {
class Context;
}

namespace ddpx {

enum class AllreduceAlgorithm : uint8_t {
  kGlooRing,         // gloo::allreduce, default (ring) algorithm: the baseline
  kGlooBcube,        // gloo::allreduce with Algorithm::BCUBE
  kGlooRing4M,       // gloo::allreduce ring with 4 MiB segments (default 1 MiB)
  kGlooRing16M,      // gloo::allreduce ring with 16 MiB segments
  kRing,             // gloo::AllreduceRing
  kRingChunked,      // gloo::AllreduceRingChunked
  kHalvingDoubling,  // gloo::AllreduceHalvingDoubling
  kBcube,            // gloo::AllreduceBcube
};
inline constexpr AllreduceAlgorithm kAllAllreduceAlgorithms[] = {
    AllreduceAlgorithm::kGlooRing,        AllreduceAlgorithm::kGlooBcube,
    AllreduceAlgorithm::kGlooRing4M,      AllreduceAlgorithm::kGlooRing16M,
    AllreduceAlgorithm::kRing,            AllreduceAlgorithm::kRingChunked,
    AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kBcube,
};

// "gloo_ring", "gloo_bcube", "gloo_ring_4m", "gloo_ring_16m", "ring", "ring_chunked", "halving_doubling",
// "bcube".
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);
absl::StatusOr<AllreduceAlgorithm> parse_allreduce_algorithm(
    const std::string& name);

// Whether `algorithm` runs on `world_size` ranks (the bcube variants need a
// power of two) and `nbytes` (the classic classes count bytes in an int).
bool allreduce_algorithm_supports(AllreduceAlgorithm algorithm, int world_size,
                                  size_t nbytes);
// Classic algorithms wait as long as their pairs allow and use nextSlot().
bool is_classic_allreduce(AllreduceAlgorithm algorithm);
// The segment size gloo::allreduce is given (0: Gloo's default, 1 MiB).
size_t allreduce_segment_bytes(AllreduceAlgorithm algorithm);

// The algorithm the measured table (allreduce_algorithms.cc) picks for a
// message of `nbytes` on `world_size` ranks; `classic_allowed` false (the
// group has no sync pairs) limits the choice to the unbound-buffer ones.
// `sync_piece_bytes` is the plan's sync_piece_bytes() (execution_plan.h):
// nonzero when large classic allreduces can run on sync pairs in pieces,
// which changes the table.
AllreduceAlgorithm choose_allreduce_algorithm(size_t nbytes, int world_size,
                                              bool classic_allowed, size_t sync_piece_bytes);

struct AllreduceCall {
  std::shared_ptr<gloo::Context> context;
  // Every buffer is reduced (locally and across ranks) and receives the
  // result, as torch's multi-tensor allreduce does.
  std::vector<void*> buffers;
  size_t count = 0;  // elements per buffer
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::SUM;  // AVG reduces as SUM; the caller divides
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{0};
};

// Runs one allreduce; throws gloo's exceptions on failure.
void run_allreduce(AllreduceAlgorithm algorithm, const AllreduceCall& call);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_ALLREDUCE_ALGORITHMS_H_
