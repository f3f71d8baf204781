#include "process_group/gloo/allreduce_algorithms.h"

#include <climits>

#include "gloo/allreduce.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/common/error.h"
#include "process_group/gloo/reduce_kernels.h"

namespace ddpx {
namespace {

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

template <typename T>
void run_classic(AllreduceAlgorithm algorithm, const AllreduceCall& call) {
  std::vector<T*> ptrs;
  ptrs.reserve(call.buffers.size());
  for (void* b : call.buffers) ptrs.push_back(static_cast<T*>(b));
  const gloo::ReductionFunction<T>* fn = classic_reduction<T>(call.op);
  const int count = static_cast<int>(call.count);
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      gloo::AllreduceRing<T>(call.context, ptrs, count, fn).run();
      return;
    case AllreduceAlgorithm::kRingChunked:
      gloo::AllreduceRingChunked<T>(call.context, ptrs, count, fn).run();
      return;
    case AllreduceAlgorithm::kHalvingDoubling:
      gloo::AllreduceHalvingDoubling<T>(call.context, ptrs, count, fn).run();
      return;
    case AllreduceAlgorithm::kBcube:
      gloo::AllreduceBcube<T>(call.context, ptrs, count, fn).run();
      return;
    default:
      GLOO_THROW_INVALID_OPERATION_EXCEPTION("not a classic algorithm");
  }
}

template <typename T>
void run_unbound(AllreduceAlgorithm algorithm, const AllreduceCall& call) {
  gloo::AllreduceOptions opts(call.context);
  std::vector<T*> ptrs;
  ptrs.reserve(call.buffers.size());
  for (void* b : call.buffers) ptrs.push_back(static_cast<T*>(b));
  opts.setOutputs(ptrs, call.count);
  opts.setReduceFunction(reduce_function(call.dtype, call.op));
  opts.setTag(call.tag);
  opts.setTimeout(call.timeout);
  if (algorithm == AllreduceAlgorithm::kGlooBcube) {
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
  }
  if (size_t segment = allreduce_segment_bytes(algorithm); segment > 0) {
    opts.setMaxSegmentSize(segment);
  }
  gloo::allreduce(opts);
}

}  // namespace

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kGlooRing: return "gloo_ring";
    case AllreduceAlgorithm::kGlooBcube: return "gloo_bcube";
    case AllreduceAlgorithm::kGlooRing4M: return "gloo_ring_4m";
    case AllreduceAlgorithm::kGlooRing16M: return "gloo_ring_16m";
    case AllreduceAlgorithm::kRing: return "ring";
    case AllreduceAlgorithm::kRingChunked: return "ring_chunked";
    case AllreduceAlgorithm::kHalvingDoubling: return "halving_doubling";
    case AllreduceAlgorithm::kBcube: return "bcube";
  }
  return "unknown";
}

absl::StatusOr<AllreduceAlgorithm> parse_allreduce_algorithm(
    const std::string& name) {
  std::string known;
  for (AllreduceAlgorithm a : kAllAllreduceAlgorithms) {
    if (name == allreduce_algorithm_name(a)) return a;
    known += known.empty() ? "" : ", ";
    known += allreduce_algorithm_name(a);
  }
  return absl::InvalidArgumentError("unknown allreduce algorithm '" + name +
                                    "' (known: " + known + ")");
}

bool is_classic_allreduce(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kGlooRing:
    case AllreduceAlgorithm::kGlooBcube:
    case AllreduceAlgorithm::kGlooRing4M:
    case AllreduceAlgorithm::kGlooRing16M:
      return false;
    default:
      return true;
  }
}

size_t allreduce_segment_bytes(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kGlooRing4M: return size_t{4} << 20;
    case AllreduceAlgorithm::kGlooRing16M: return size_t{16} << 20;
    default: return 0;
  }
}

bool allreduce_algorithm_supports(AllreduceAlgorithm algorithm, int world_size,
                                  size_t nbytes) {
  if (algorithm == AllreduceAlgorithm::kGlooBcube ||
      algorithm == AllreduceAlgorithm::kBcube) {
    if (!is_power_of_two(world_size)) return false;
  }
  // The classic classes keep the byte count in an int.
  if (is_classic_allreduce(algorithm) && nbytes > static_cast<size_t>(INT_MAX / 2)) {
    return false;
  }
  return true;
}

// Measured with `collective_bench --nproc=2` and `--nproc=4` on the 2-core
// development VM (gVisor, loopback TCP; see docs/gloo.md). Small messages are
// latency-bound, and there the classic algorithms (one exchange per round on
// pre-registered pair buffers) beat gloo::allreduce's segmented ring by 1.5x
// to 10x: AllreduceRing on two ranks, halving-doubling beyond. From a few
// hundred KiB up the classic classes lose (they malloc and touch inbox/outbox
// buffers as large as the message on every call) and Gloo's own default is
// the best of the set, so it stays the choice there, except that from
// 32 MiB its ring with 4 MiB segments (fewer, larger exchanges) was faster
// in both runs of 2026-11-22 (2 ranks: 64 MiB 32.8 vs 41.4 ms; 4 ranks:
// 75.6 vs 80.1 ms; 32 MiB likewise). On two ranks (2026-11-24, event-loop
// pairs, two runs each): the classic ring wins up to 64 KiB (64 KiB: 160-170
// us against halving-doubling's 250-280), halving-doubling from 128 KiB
// (128 KiB: 198-234 us against the ring's 239-287 and Gloo's default's
// 236-301; 256 KiB: 340-352 against 413-440) until Gloo's default takes over
// at 512 KiB (360 against 394 us).
constexpr size_t kClassicUpToBytes = 128 << 10;
constexpr size_t kTwoRankRingUpToBytes = 64 << 10;
constexpr size_t kTwoRankClassicUpToBytes = 256 << 10;
constexpr size_t kLargeSegmentsFromBytes = size_t{32} << 20;

// With sync pairs that take pieces of 1 MiB or more (sync_pairs.h), the
// classic algorithms read by the op's own thread beat every event-loop
// algorithm from 8 B to 16 MiB (2026-11-24, 2 MiB pieces, three runs per
// world size, docs/gloo.md "Allreduce algorithm choice"): 2 ranks 512 KiB
// 209-212 us against Gloo's default's 439-456; 8 MiB 3.9 ms against 6.4;
// 4 ranks 512 KiB 0.62-1.24 ms against 3.8-5.2; 8 MiB 18.7 ms against 20.7. So
// halving-doubling is the choice above the two-rank ring's range, up to
// 32 MiB: there the pieces (one blocking exchange at a time, no overlap of
// reduction and transfer) only tie with Gloo's ring with 4 MiB segments on
// 2 ranks (64 MiB: 56-59 against 53-60 ms) and lose or tie on 4 (64 MiB:
// 80-135 against 98-107 ms), which stays.
AllreduceAlgorithm choose_allreduce_algorithm(size_t nbytes, int world_size,
                                              bool classic_allowed, size_t sync_piece_bytes) {
  if (nbytes >= kLargeSegmentsFromBytes) return AllreduceAlgorithm::kGlooRing4M;
  if (world_size > 1 && classic_allowed && sync_piece_bytes > 0) {
    if (world_size == 2 && nbytes <= kTwoRankRingUpToBytes) return AllreduceAlgorithm::kRing;
    return AllreduceAlgorithm::kHalvingDoubling;
  }
  const size_t classic_up_to = world_size == 2 ? kTwoRankClassicUpToBytes : kClassicUpToBytes;
  if (world_size <= 1 || !classic_allowed || nbytes > classic_up_to) {
    return AllreduceAlgorithm::kGlooRing;
  }
  if (world_size == 2 && nbytes <= kTwoRankRingUpToBytes) return AllreduceAlgorithm::kRing;
  return AllreduceAlgorithm::kHalvingDoubling;
}

void run_allreduce(AllreduceAlgorithm algorithm, const AllreduceCall& call) {
  if (call.count == 0) return;
  visit_dtype(call.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (is_classic_allreduce(algorithm)) {
      run_classic<T>(algorithm, call);
    } else {
      run_unbound<T>(algorithm, call);
    }
  });
}

}  // namespace ddpx
