#include "hooks/bytegrad.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/bucket_math.h"
#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace {

uint8_t* bytes(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

// Buffers of a bucket on a device live on that device. Each is filled
// before it is read: by a collective, or record by record (the CPU zeroes a
// short record's padding, which is sent but never decoded, so the bytes on
// the wire do not depend on what the memory held; a device leaves it).
absl::StatusOr<Tensor> byte_tensor(int64_t n, Device device) {
  if (device.is_cpu()) return Tensor::uninitialized({n}, DType::kUInt8);
  return Tensor::empty({n}, DType::kUInt8, device);
}

// Zeroes the padding after a record of `len` codes in a slot of `layout`.
void zero_padding(uint8_t* record, const ChunkLayout& layout, int64_t len) {
  const size_t used = kernels::quantized_record_bytes(len);
  std::fill(record + used, record + layout.record_bytes, uint8_t{0});
}

// Record `slot` of a ByteGrad buffer, sized for a chunk of `len` values.
Tensor record(const Tensor& records, const ChunkLayout& layout, int slot, int64_t len) {
  return records.view(slot * layout.record_bytes,
                      {static_cast<int64_t>(kernels::quantized_record_bytes(len))});
}

// Step 2's send buffer: record c holds chunk c of `data` / `divisor`. `k`
// is null for a CPU buffer, else the kernels of its device (one record per
// call, so the bytes equal the CPU kernels'; the divisor is 1 there).
absl::StatusOr<Tensor> quantize_chunks(const Tensor& data, const ChunkLayout& layout,
                                       DeviceKernels* k, float divisor = 1.0f) {
  absl::StatusOr<Tensor> send = byte_tensor(layout.world * layout.record_bytes, data.device());
  if (!send.ok()) return send.status();
  for (int c = 0; c < layout.world; ++c) {
    const int64_t len = layout.length(c);
    if (k == nullptr) {
      uint8_t* out = bytes(*send) + c * layout.record_bytes;
      kernels::quantize_divided(data.data_as<float>() + layout.begin(c), len, divisor, out);
      zero_padding(out, layout, len);
    } else if (len > 0) {  // an empty chunk's header is never decoded
      absl::Status s =
          k->quantize_minmax(data.view(layout.begin(c), {len}), len, record(*send, layout, c, len));
      if (!s.ok()) return s;
    }
  }
  return send;
}

// Steps 3 and 4: this rank's chunk, averaged and quantized again. On a
// device the records are summed there (the same float adds in the same rank
// order as the CPU), and the n/p sums cross to the host for the division and
// the re-quantization, since DeviceKernels has no division.
absl::StatusOr<Tensor> reduce_own_chunk(const Tensor& received, const ChunkLayout& layout,
                                        int rank, DeviceKernels* k) {
  const int64_t len = layout.length(rank);
  if (k == nullptr) {  // the sum in one pass, quantized as its average in two
    std::vector<const uint8_t*> records(layout.world);
    for (int src = 0; src < layout.world; ++src) {
      records[src] = bytes(received) + src * layout.record_bytes;
    }
    Tensor sum = Tensor::uninitialized({len}, DType::kFloat32);
    kernels::dequantize_sum(records.data(), layout.world, len, sum.data_as<float>());
    Tensor mine = Tensor::uninitialized({layout.record_bytes}, DType::kUInt8);
    kernels::quantize_divided(sum.data_as<float>(), len, static_cast<float>(layout.world),
                              bytes(mine));
    zero_padding(bytes(mine), layout, len);
    return mine;
  }
  Tensor acc = Tensor::zeros({len}, DType::kFloat32);
  if (len > 0) {
    absl::StatusOr<Tensor> device_acc = Tensor::empty({len}, DType::kFloat32, received.device());
    if (!device_acc.ok()) return device_acc.status();
    if (absl::Status s = device_acc->copy_from(acc); !s.ok()) return s;
    for (int src = 0; src < layout.world; ++src) {
      absl::Status s = k->dequantize_minmax(
          record(received, layout, src, len), len, *device_acc, /*accumulate=*/true);
      if (!s.ok()) return s;
    }
    if (absl::Status s = k->synchronize(received.device()); !s.ok()) return s;
    if (absl::Status s = acc.copy_from(*device_acc); !s.ok()) return s;
  }
  Tensor mine = Tensor::zeros({layout.record_bytes}, DType::kUInt8);
  kernels::quantize_divided(acc.data_as<float>(), len, static_cast<float>(layout.world),
                            bytes(mine));
  absl::StatusOr<Tensor> device_mine = Tensor::empty({layout.record_bytes}, DType::kUInt8,
                                                     received.device());
  if (!device_mine.ok()) return device_mine.status();
  if (absl::Status s = device_mine->copy_from(mine); !s.ok()) return s;
  return device_mine;
}

// Step 5. On a device it returns once the values are in place.
absl::Status decode_all(const Tensor& gathered, const ChunkLayout& layout, const Tensor& data,
                        DeviceKernels* k) {
  for (int c = 0; c < layout.world; ++c) {
    const int64_t len = layout.length(c);
    if (k == nullptr) {
      kernels::dequantize(bytes(gathered) + c * layout.record_bytes, len,
                          data.data_as<float>() + layout.begin(c));
    } else if (len > 0) {
      absl::Status s = k->dequantize_minmax(record(gathered, layout, c, len), len,
                                            data.view(layout.begin(c), {len}), false);
      if (!s.ok()) return s;
    }
  }
  return k == nullptr ? absl::OkStatus() : k->synchronize(data.device());
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

Tensor bytegrad_quantize(const Tensor& data, const ChunkLayout& layout, float divisor) {
  return *quantize_chunks(data, layout, nullptr, divisor);
}

Tensor bytegrad_average_own_chunk(const Tensor& received, const ChunkLayout& layout, int rank) {
  return *reduce_own_chunk(received, layout, rank, nullptr);
}

void bytegrad_decode(const Tensor& gathered, const ChunkLayout& layout, const Tensor& data) {
  decode_all(gathered, layout, data, nullptr).IgnoreError();  // fails on devices only
}

std::shared_ptr<Future<Tensor>> bytegrad_average(std::shared_ptr<ProcessGroup> group,
                                                 Tensor data, HookStatsCounter* counter) {
  const int world = group->size();
  const int rank = group->rank();
  const ChunkLayout layout(data.numel(), world);
  DeviceKernels* k = nullptr;
  if (!data.device().is_cpu()) {
    absl::StatusOr<DeviceKernels*> found = kernels_for(data, "int8 hook");
    if (!found.ok()) return Future<Tensor>::failed(found.status());
    k = *found;
  }
  absl::StatusOr<Tensor> quantized = quantize_chunks(data, layout, k);
  if (!quantized.ok()) return Future<Tensor>::failed(annotate(quantized.status(), "quantize"));
  Tensor send = *quantized;
  if (counter != nullptr) {
    const uint64_t all = send.nbytes(), one = layout.record_bytes;
    counter->add_traffic(all + one, alltoall_wire_bytes(all, world) +
                                        allgather_wire_bytes(one, world));
  }
  if (world == 1) {
    absl::StatusOr<Tensor> mine = reduce_own_chunk(send, layout, 0, k);
    absl::Status s = mine.ok() ? decode_all(*mine, layout, data, k) : mine.status();
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
    absl::StatusOr<Tensor> mine = reduce_own_chunk(received, layout, rank, k);
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
          if (absl::Status s = decode_all(gathered, layout, data, k); !s.ok()) {
            result->set_error(annotate(s, "decode"));
            return;
          }
          result->set_value(data);
        });
  });
  return result;
}

}  // namespace ddpx
