// Bagua's ByteGrad exchange (Bagua's "Low Precision Stochastic Gradient"
// documentation; Gan et al., "BAGUA", VLDB 2022): averaging a float32 buffer
// over a group while only 8-bit codes cross the network.
//
//   1. split the buffer into one chunk per rank (chunk c: elements
//      [c*k, min(n, (c+1)*k)), k = ceil(n / p));
//   2. quantize every chunk (cuda/quantize_math.h's record: min, max, codes) and
//      alltoall, so rank c receives every rank's chunk c;
//   3. dequantize those p records, sum them in float32 in rank order and
//      divide by p;
//   4. quantize the averaged chunk and allgather it;
//   5. decode all p records into the buffer.
// Every rank decodes the same bytes with the same code, so all ranks end
// with identical values. Each element carries two quantization errors, each
// at most half a step of its chunk.
#ifndef DDPX_HOOKS_BYTEGRAD_H_
#define DDPX_HOOKS_BYTEGRAD_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hooks/hook_stats.h"
#include "core/future.h"
#include "process_group/front_end/process_group.h"
#include "core/tensor.h"

namespace ddpx {

// How a buffer of n elements is cut into p chunks and records.
struct ChunkLayout {
  ChunkLayout(int64_t numel, int world);
  int64_t numel;
  int world;
  int64_t chunk;          // elements per chunk (the last may be shorter)
  int64_t record_bytes;   // header + chunk codes; every record is this long
  int64_t begin(int c) const;
  int64_t length(int c) const;
};

// Averages `data` (flat float32, on the CPU or a device with kernels:
// every step runs through kernels_for(data), bucket_math.h) over `group` as
// above; the future completes with `data` itself overwritten by the
// average. `counter`, if set, gets the traffic before this returns. The
// callbacks, which run on the backend's threads, hold `group` until the
// exchange is done. A group of one rank quantizes and decodes locally, so
// the result has the same error either way.
//
// The exchange's local steps on CPU buffers, for a caller that pipelines
// several exchanges over one group and issues the collectives itself (the
// int8 pipeline): step 2's send buffer (one record per chunk of
// data / divisor: the hierarchical hook quantizes the host's average
// straight from its sum), steps 3-4 (this rank's chunk averaged over the
// received records and quantized again: one record) and step 5 (every
// gathered record decoded into `data`).
absl::StatusOr<Tensor> bytegrad_quantize(const Tensor& data, const ChunkLayout& layout,
                                         float divisor = 1.0f);
absl::StatusOr<Tensor> bytegrad_average_own_chunk(const Tensor& received,
                                                  const ChunkLayout& layout, int rank);
absl::Status bytegrad_decode(const Tensor& gathered, const ChunkLayout& layout,
                             const Tensor& data);

std::shared_ptr<Future<Tensor>> bytegrad_average(std::shared_ptr<ProcessGroup> group,
                                                 Tensor data, HookStatsCounter* counter);

}  // namespace ddpx

#endif  // DDPX_HOOKS_BYTEGRAD_H_
