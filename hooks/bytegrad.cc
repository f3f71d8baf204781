#include "hooks/bytegrad.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/host_kernels.h"
#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace {

// Buffers of a bucket live on its device. Each is filled before it is
// read: by a collective, or record by record (a short record's padding is
// zeroed: it is sent but never decoded, and the bytes on the wire must not
// depend on what the memory held).
absl::StatusOr<Tensor> byte_tensor(int64_t n, Device device) {
  if (device.is_cpu()) return Tensor::uninitialized({n}, DType::kUInt8);
  return Tensor::empty({n}, DType::kUInt8, device);
}

// Slot `c` of a ByteGrad buffer: record_bytes bytes, whatever its chunk's length.
Tensor slot(const Tensor& records, const ChunkLayout& layout, int c) {
  return records.view(c * layout.record_bytes, {layout.record_bytes});
}

// Step 2's send buffer: slot c holds the record of chunk c of `data` / `divisor`.
absl::StatusOr<Tensor> quantize_chunks(const Tensor& data, const ChunkLayout& layout,
                                       DeviceKernels& k, float divisor = 1.0f) {
  absl::StatusOr<Tensor> send = byte_tensor(layout.world * layout.record_bytes, data.device());
  if (!send.ok()) return send.status();
  for (int c = 0; c < layout.world; ++c) {
    absl::Status s = k.quantize_divided(data.view(layout.begin(c), {layout.length(c)}),
                                        divisor, slot(*send, layout, c));
    if (!s.ok()) return s;
  }
  return send;
}

// Steps 3 and 4: this rank's chunk, the received records summed in rank
// order in one pass and quantized as their average (the division fused into
// the quantization), where the bucket lives.
absl::StatusOr<Tensor> reduce_own_chunk(const Tensor& received, const ChunkLayout& layout,
                                        int rank, DeviceKernels& k) {
  const int64_t len = layout.length(rank);
  const Device device = received.device();
  absl::StatusOr<Tensor> sum = device.is_cpu()
                                   ? Tensor::uninitialized({len}, DType::kFloat32)
                                   : Tensor::empty({len}, DType::kFloat32, device);
  if (!sum.ok()) return sum.status();
  absl::StatusOr<Tensor> mine = byte_tensor(layout.record_bytes, device);
  if (!mine.ok()) return mine.status();
  if (absl::Status s = k.dequantize_sum(received, layout.world, layout.record_bytes, *sum);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = k.quantize_divided(*sum, static_cast<float>(layout.world), *mine);
      !s.ok()) {
    return s;
  }
  return mine;
}

// Step 5. Returns once the values are in place.
absl::Status decode_all(const Tensor& gathered, const ChunkLayout& layout, const Tensor& data,
                        DeviceKernels& k) {
  for (int c = 0; c < layout.world; ++c) {
    const int64_t len = layout.length(c);
    if (len == 0) continue;  // nothing to decode
    absl::Status s = k.dequantize_minmax(slot(gathered, layout, c).view(
        0, {static_cast<int64_t>(kernels::quantized_record_bytes(len))}), len,
                                         data.view(layout.begin(c), {len}), false);
    if (!s.ok()) return s;
  }
  return k.synchronize(data.device());
}

absl::Status annotate(const absl::Status& s, const char* step) {
  return absl::Status(s.code(), absl::StrCat("int8 hook (", step, "): ", s.message()));
}

}  // namespace

ChunkLayout::ChunkLayout(int64_t numel_, int world_)
    : numel(numel_), world(world_) {
  chunk = world > 0 ? (numel + world - 1) / world : numel;
  record_bytes = static_cast<int64_t>(kernels::quantized_record_bytes(chunk));
}

int64_t ChunkLayout::begin(int c) const { return std::min(numel, c * chunk); }

int64_t ChunkLayout::length(int c) const {
  return std::min(numel, (c + 1) * chunk) - begin(c);
}

absl::StatusOr<Tensor> bytegrad_quantize(const Tensor& data, const ChunkLayout& layout,
                                         float divisor) {
  return quantize_chunks(data, layout, host_kernels(), divisor);
}

absl::StatusOr<Tensor> bytegrad_average_own_chunk(const Tensor& received,
                                                  const ChunkLayout& layout, int rank) {
  return reduce_own_chunk(received, layout, rank, host_kernels());
}

absl::Status bytegrad_decode(const Tensor& gathered, const ChunkLayout& layout,
                             const Tensor& data) {
  return decode_all(gathered, layout, data, host_kernels());
}

std::shared_ptr<Future<Tensor>> bytegrad_average(std::shared_ptr<ProcessGroup> group,
                                                 Tensor data, HookStatsCounter* counter) {
  const int world = group->size();
  const int rank = group->rank();
  const ChunkLayout layout(data.numel(), world);
  absl::StatusOr<DeviceKernels*> found = kernels_for(data, "int8 hook");
  if (!found.ok()) return Future<Tensor>::failed(found.status());
  DeviceKernels* k = *found;  // process-lifetime: the callbacks may use it
  absl::StatusOr<Tensor> quantized = quantize_chunks(data, layout, *k);
  if (!quantized.ok()) return Future<Tensor>::failed(annotate(quantized.status(), "quantize"));
  Tensor send = *quantized;
  if (counter != nullptr) {
    const uint64_t all = send.nbytes(), one = layout.record_bytes;
    counter->add_traffic(all + one, alltoall_wire_bytes(all, world) +
                                        allgather_wire_bytes(one, world));
  }
  if (world == 1) {
    absl::StatusOr<Tensor> mine = reduce_own_chunk(send, layout, 0, *k);
    absl::Status s = mine.ok() ? decode_all(*mine, layout, data, *k) : mine.status();
    if (!s.ok()) return Future<Tensor>::failed(annotate(s, "average"));
    return Future<Tensor>::ready(data);
  }

  auto result = Future<Tensor>::create();
  absl::StatusOr<Tensor> received = byte_tensor(send.numel(), data.device());
  absl::StatusOr<Tensor> gathered = byte_tensor(send.numel(), data.device());
  if (!received.ok() || !gathered.ok()) {
    return Future<Tensor>::failed(
        annotate(received.ok() ? gathered.status() : received.status(), "buffers"));
  }
  std::shared_ptr<Work> exchange = group->alltoall_base(*received, send);
  // `send` must stay alive until the alltoall is done.
  exchange->get_future()->add_callback([=, received = *received, gathered = *gathered](
                                           Future<TensorList>& done) {
    (void)send;
    if (!done.status().ok()) {
      result->set_error(annotate(done.status(), "alltoall of quantized chunks"));
      return;
    }
    absl::StatusOr<Tensor> mine = reduce_own_chunk(received, layout, rank, *k);
    if (!mine.ok()) {
      result->set_error(annotate(mine.status(), "average of own chunk"));
      return;
    }
    group->allgather_into_tensor(gathered, *mine)->get_future()->add_callback(
        [=, mine = *mine](Future<TensorList>& all) {
          (void)mine;
          if (!all.status().ok()) {
            result->set_error(annotate(all.status(), "allgather of averaged chunks"));
            return;
          }
          if (absl::Status s = decode_all(gathered, layout, data, *k); !s.ok()) {
            result->set_error(annotate(s, "decode"));
            return;
          }
          result->set_value(data);
        });
  });
  return result;
}

}  // namespace ddpx
