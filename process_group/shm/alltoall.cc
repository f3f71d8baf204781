#include "process_group/shm/alltoall.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "process_group/shm/layout.h"

namespace ddpx {
namespace shm {
namespace {

// Where each part of a chunk lies in a rank's slot: its split sizes (sent
// in the first chunk only), then one region per destination rank.
struct ChunkLayout {
  size_t header_bytes;  // 2 * size uint64: send sizes, then receive sizes
  size_t region_bytes;  // per destination rank
  ChunkLayout(size_t slot_bytes, int n) {
    header_bytes = (2 * static_cast<size_t>(n) * sizeof(uint64_t) + kCacheLine - 1) /
                   kCacheLine * kCacheLine;
    const size_t per = slot_bytes > header_bytes ? (slot_bytes - header_bytes) / n : 0;
    // Whole cache lines where they fit, so two ranks' reads of one slot
    // never share a line with another region.
    region_bytes = per >= kCacheLine ? per / kCacheLine * kCacheLine : per;
  }
  size_t region(int rank) const { return header_bytes + static_cast<size_t>(rank) * region_bytes; }
};

std::vector<size_t> offsets_of(const std::vector<int64_t>& bytes) {
  std::vector<size_t> offsets(bytes.size() + 1, 0);
  for (size_t r = 0; r < bytes.size(); ++r) offsets[r + 1] = offsets[r] + bytes[r];
  return offsets;
}

// The part of a block of `total` bytes that the chunk at `offset` carries.
size_t part(int64_t total, size_t offset, size_t region_bytes) {
  const size_t t = static_cast<size_t>(total);
  return t > offset ? std::min(region_bytes, t - offset) : 0;
}

// Reads every rank's split sizes from the first chunk: checks that what
// each rank sends each other is what that one expects, and returns the
// largest block between two ranks.
absl::Status read_sizes(const Channel& ch, int slot, uint64_t* largest) {
  const int n = ch.size();
  *largest = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t* sends = reinterpret_cast<const uint64_t*>(ch.slot(i, slot));
    for (int j = 0; j < n; ++j) {
      const uint64_t* expects = reinterpret_cast<const uint64_t*>(ch.slot(j, slot)) + n;
      if (sends[j] != expects[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "alltoall on the shared-memory path: rank ", i, " sends ", sends[j], " B to rank ", j,
            ", which expects ", expects[i], " B from it (split sizes disagree)"));
      }
      if (i != j) *largest = std::max(*largest, sends[j]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status alltoall(Channel& ch, const void* in, const std::vector<int64_t>& send_bytes,
                      void* out, const std::vector<int64_t>& recv_bytes,
                      const Deadline& deadline) {
  if (absl::Status s = ch.health(); !s.ok()) return s;
  ch.begin_op({OpDescription::kAlltoall, 0, -1, 0});
  const int me = ch.rank(), n = ch.size();
  const std::vector<size_t> send_at = offsets_of(send_bytes), recv_at = offsets_of(recv_bytes);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (n > 1) {
    const ChunkLayout layout(ch.slot_bytes(), n);
    if (layout.region_bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoall on the shared-memory path: a slot of ", ch.slot_bytes(),
          " B has no room for ", n, " ranks' regions (GlooOptions::shm_slot_bytes)"));
    }
    // The number of chunks is known after the first one, which carries the sizes.
    uint64_t chunks = 1;
    for (uint64_t k = 0; k < chunks; ++k) {
      const size_t offset = k * layout.region_bytes;
      int s;
      if (absl::Status st = ch.acquire_slot(/*will_write=*/true, deadline, &s); !st.ok()) return st;
      uint8_t* mine = ch.slot(me, s);
      if (k == 0) {
        auto* sizes = reinterpret_cast<uint64_t*>(mine);
        for (int r = 0; r < n; ++r) {
          sizes[r] = static_cast<uint64_t>(send_bytes[r]);
          sizes[n + r] = static_cast<uint64_t>(recv_bytes[r]);
        }
      }
      for (int distance = 1; distance < n; ++distance) {
        const int peer = (me + distance) % n;
        const size_t len = part(send_bytes[peer], offset, layout.region_bytes);
        if (len > 0) memcpy(mine + layout.region(peer), src + send_at[peer] + offset, len);
      }
      const uint32_t written = ch.post();
      if (absl::Status st = ch.wait_all(written, deadline); !st.ok()) return st;
      if (k == 0) {
        uint64_t largest;
        absl::Status sizes = read_sizes(ch, s, &largest);
        if (!sizes.ok()) {
          // Every rank found the same pair: all leave the op here, in step.
          ch.release_slot(s, ch.post());
          return sizes;
        }
        chunks = std::max<uint64_t>(1, (largest + layout.region_bytes - 1) / layout.region_bytes);
      }
      for (int distance = 1; distance < n; ++distance) {
        const int peer = (me + distance) % n;
        const size_t len = part(recv_bytes[peer], offset, layout.region_bytes);
        if (len > 0) {
          memcpy(dst + recv_at[peer] + offset, ch.slot(peer, s) + layout.region(me), len);
        }
      }
      ch.release_slot(s, ch.post());
    }
  }
  // This rank's block for itself (its sizes agree: read_sizes checked them).
  const size_t own = static_cast<size_t>(std::min(send_bytes[me], recv_bytes[me]));
  if (own > 0) memcpy(dst + recv_at[me], src + send_at[me], own);
  return absl::OkStatus();
}

}  // namespace shm
}  // namespace ddpx
