#include "hooks/bytegrad.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/kernels/cpu_kernels.h"

namespace ddpx {
namespace {

uint8_t* bytes(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

Tensor byte_tensor(int64_t n) { return Tensor::zeros({n}, DType::kUInt8); }

// Step 2's send buffer: record c holds chunk c of `data`.
Tensor quantize_chunks(const Tensor& data, const ChunkLayout& layout) {
  Tensor send = byte_tensor(layout.world * layout.record_bytes);
  const float* src = data.data_as<float>();
  for (int c = 0; c < layout.world; ++c) {
    kernels::quantize(src + layout.begin(c), layout.length(c),
                      bytes(send) + c * layout.record_bytes);
  }
  return send;
}

// Steps 3 and 4: this rank's chunk, averaged and quantized again.
Tensor reduce_own_chunk(const Tensor& received, const ChunkLayout& layout, int rank) {
  const int64_t len = layout.length(rank);
  std::vector<float> acc(static_cast<size_t>(len), 0.0f);
  for (int src = 0; src < layout.world; ++src) {
    kernels::dequantize_add(bytes(received) + src * layout.record_bytes, len, acc.data());
  }
  kernels::divide(acc.data(), len, static_cast<float>(layout.world));
  Tensor mine = byte_tensor(layout.record_bytes);
  kernels::quantize(acc.data(), len, bytes(mine));
  return mine;
}

// Step 5.
void decode_all(const Tensor& gathered, const ChunkLayout& layout, const Tensor& data) {
  float* dst = data.data_as<float>();
  for (int c = 0; c < layout.world; ++c) {
    kernels::dequantize(bytes(gathered) + c * layout.record_bytes, layout.length(c),
                        dst + layout.begin(c));
  }
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

std::shared_ptr<Future<Tensor>> bytegrad_average(ProcessGroup& group_ref, Tensor data,
                                                 HookStatsCounter* counter) {
  ProcessGroup* group = &group_ref;
  const int world = group->size();
  const int rank = group->rank();
  const ChunkLayout layout(data.numel(), world);
  Tensor send = quantize_chunks(data, layout);
  if (counter != nullptr) {
    const uint64_t all = send.nbytes(), one = layout.record_bytes;
    counter->add_traffic(all + one, alltoall_wire_bytes(all, world) +
                                        allgather_wire_bytes(one, world));
  }
  if (world == 1) {
    decode_all(reduce_own_chunk(send, layout, 0), layout, data);
    return Future<Tensor>::ready(data);
  }

  auto result = Future<Tensor>::create();
  Tensor received = byte_tensor(send.numel());
  std::shared_ptr<Work> exchange = group->alltoall_base(received, send);
  // `send` must stay alive until the alltoall is done.
  exchange->get_future()->add_callback([=](Future<TensorList>& done) {
    (void)send;
    if (!done.status().ok()) {
      result->set_error(annotate(done.status(), "alltoall of quantized chunks"));
      return;
    }
    Tensor mine = reduce_own_chunk(received, layout, rank);
    Tensor gathered = byte_tensor(send.numel());
    group->allgather_into_tensor(gathered, mine)->get_future()->add_callback(
        [=](Future<TensorList>& all) {
          (void)mine;
          if (!all.status().ok()) {
            result->set_error(annotate(all.status(), "allgather of averaged chunks"));
            return;
          }
          decode_all(gathered, layout, data);
          result->set_value(data);
        });
  });
  return result;
}

}  // namespace ddpx
