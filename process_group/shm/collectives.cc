#include "process_group/shm/collectives.h"

#include <emmintrin.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ddpx {
namespace shm {
namespace {

#define RETURN_IF_ERROR(expr)              \
  do {                                     \
    absl::Status status_ = (expr);         \
    if (!status_.ok()) return status_;     \
  } while (false)

uint8_t* at(void* base, size_t offset) { return static_cast<uint8_t*>(base) + offset; }
const uint8_t* at(const void* base, size_t offset) {
  return static_cast<const uint8_t*>(base) + offset;
}

// memcpy whose stores bypass the cache: for outputs too large to stay in
// cache anyway, it saves the read of each destination line that a normal
// store costs (a third of the traffic of a copy).
void copy_streaming(uint8_t* dst, const uint8_t* src, size_t n) {
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // streaming stores are weakly ordered: finish them here
}

// Part j of a chunk of `count` elements split between `n` ranks: parts start
// on cache-line boundaries, so two ranks never write one line.
struct Parts {
  size_t per_part;  // elements
  size_t count;
  Parts(size_t count, int n, size_t element_bytes) : count(count) {
    const size_t line = std::max<size_t>(1, kCacheLine / element_bytes);
    per_part = round_up((count + n - 1) / n, line);
  }
  size_t begin(int j) const { return std::min(count, j * per_part); }
  size_t end(int j) const { return std::min(count, (j + 1) * per_part); }
};

// A one-pass allreduce up to this size asks for all its lines at once
// (SmallAllreduce::finish), and takes as many of its next slot for
// writing; measured on 2 ranks, 2 KiB went from 1.45 to 0.9 us, while a
// 32 KiB one-pass allreduce went from 6 to 7.5 us when it did so too.
constexpr size_t kPrefetchMaxBytes = 8 << 10;

// The split reduction's block: its own part of a chunk is reduced and
// copied out this much at a time (with the peers' parts, three streams in
// L1).
constexpr size_t kReduceBlockBytes = 8 << 10;

// One chunk of the split reduction: `count` elements at `data`, staged in
// `slot`, part j reduced by rank j (Parts).
struct Chunk {
  uint8_t* data;
  size_t count;
  int slot;
};

// Copies this rank's input of the peers' parts into its slot (it reduces its
// own part straight from `data`).
void copy_in(Channel& ch, const Chunk& c, size_t e) {
  const Parts parts(c.count, ch.size(), e);
  const size_t lo = parts.begin(ch.rank()), hi = parts.end(ch.rank());
  uint8_t* mine = ch.slot(ch.rank(), c.slot);
  memcpy(mine, c.data, lo * e);
  memcpy(mine + hi * e, c.data + hi * e, (c.count - hi) * e);
}

void copy(uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  if (stream) {
    copy_streaming(dst, src, n);
  } else {
    memcpy(dst, src, n);
  }
}

// Reduces this rank's part into its slot, once every peer copied the chunk
// in; with `copy_out`, the result goes to `data` too.
void reduce_own_part(Channel& ch, const Chunk& c, Reduction r, bool copy_out, bool stream) {
  const int me = ch.rank(), n = ch.size();
  const size_t e = r.element_bytes;
  const Parts parts(c.count, n, e);
  uint8_t* mine = ch.slot(me, c.slot);
  // Block by block, so that this rank's own result is copied out while
  // the block is still in L1 (one pass over the part instead of two).
  const size_t per_block = std::max<size_t>(1, kReduceBlockBytes / e);
  for (size_t b = parts.begin(me); b < parts.end(me); b += per_block) {
    const size_t len = std::min(per_block, parts.end(me) - b);
    for (int k = 1; k < n; ++k) {
      const int peer = (me + k) % n;
      r.fn(mine + b * e, k == 1 ? c.data + b * e : mine + b * e, ch.slot(peer, c.slot) + b * e, len);
    }
    if (copy_out) copy(c.data + b * e, mine + b * e, len * e, stream);
  }
}

// Copies every peer's reduced part out of its slot, once each posted it.
void copy_out_peers(Channel& ch, const Chunk& c, size_t e, bool stream) {
  const int me = ch.rank(), n = ch.size();
  const Parts parts(c.count, n, e);
  for (int k = 1; k < n; ++k) {
    const int owner = (me + k) % n;
    const size_t b = parts.begin(owner), len = parts.end(owner) - b;
    if (len > 0) copy(c.data + b * e, ch.slot(owner, c.slot) + b * e, len * e, stream);
  }
}

// One chunk at a time, three steps each (copied in, reduced, copied out):
// for channels of fewer than three slots, where the pipeline below would
// wait for a slot that its peers free only after this rank's next step.
absl::Status reduce_chunk_by_chunk(Channel& ch, uint8_t* data, size_t count, size_t per_chunk,
                                   Reduction r, bool copy_out, bool stream,
                                   const Deadline& deadline) {
  const size_t e = r.element_bytes;
  for (size_t offset = 0; offset < count; offset += per_chunk) {
    Chunk c{data + offset * e, std::min(per_chunk, count - offset), 0};
    RETURN_IF_ERROR(ch.acquire_slot(/*will_write=*/true, deadline, &c.slot));
    copy_in(ch, c, e);
    RETURN_IF_ERROR(ch.wait_all(ch.post(), deadline));
    reduce_own_part(ch, c, r, copy_out, stream);
    const uint32_t reduced = ch.post();
    if (copy_out) {
      RETURN_IF_ERROR(ch.wait_all(reduced, deadline));
      copy_out_peers(ch, c, e, stream);
    }
    ch.release_slot(c.slot, ch.post());
  }
  return absl::OkStatus();
}

// The chunks in a pipeline of one step per chunk: step k+1 (k = 0..C-1)
// says "reduced my part of chunk k-1 and copied chunk k+1 in", so one wait
// for the peers' step k+1 lets this rank copy out chunk k-1 and reduce
// chunk k. C+1 steps for C chunks instead of 3C: each step is a hand-off
// between ranks, and on a loaded host each hand-off may wait for a peer to
// get a CPU back. Three chunks are in flight (copy-out, reduction, copy-in),
// so the channel needs three slots; a peer reads this rank's slot of chunk
// k for the last time before it posts step k+2.
absl::Status reduce_pipelined(Channel& ch, uint8_t* data, size_t count, size_t per_chunk,
                              Reduction r, bool copy_out, bool stream, const Deadline& deadline) {
  const size_t e = r.element_bytes;
  auto chunk_at = [&](size_t offset) {
    return Chunk{data + offset * e, std::min(per_chunk, count - offset), 0};
  };
  Chunk current = chunk_at(0), previous{};
  RETURN_IF_ERROR(ch.acquire_slot(/*will_write=*/true, deadline, &current.slot));
  copy_in(ch, current, e);
  uint32_t step = ch.post();
  bool has_previous = false;
  for (size_t offset = 0; offset < count; offset += per_chunk) {
    RETURN_IF_ERROR(ch.wait_all(step, deadline));
    if (has_previous) {
      if (copy_out) copy_out_peers(ch, previous, e, stream);
      ch.release_slot(previous.slot, step + 1);
    }
    reduce_own_part(ch, current, r, copy_out, stream);
    previous = current;
    has_previous = true;
    if (offset + per_chunk < count) {
      current = chunk_at(offset + per_chunk);
      RETURN_IF_ERROR(ch.acquire_slot(/*will_write=*/true, deadline, &current.slot));
      copy_in(ch, current, e);
    }
    step = ch.post();
  }
  RETURN_IF_ERROR(ch.wait_all(step, deadline));
  if (copy_out) copy_out_peers(ch, previous, e, stream);
  // The peers' next step, in whatever op comes next, follows their reads.
  ch.release_slot(previous.slot, step + 1);
  return absl::OkStatus();
}

absl::Status reduce_in_chunks(Channel& ch, void* data, size_t count, Reduction r, int root,
                              const Deadline& deadline) {
  const size_t per_chunk = std::max<size_t>(1, ch.slot_bytes() / r.element_bytes);
  const bool stream = count * r.element_bytes >= kStreamingCopyFromBytes;
  const bool copy_out = root < 0 || root == ch.rank();
  uint8_t* bytes = static_cast<uint8_t*>(data);
  if (ch.num_slots() >= 3) {
    return reduce_pipelined(ch, bytes, count, per_chunk, r, copy_out, stream, deadline);
  }
  return reduce_chunk_by_chunk(ch, bytes, count, per_chunk, r, copy_out, stream, deadline);
}

}  // namespace

bool SmallAllreduce::fits(const Channel& ch, size_t count, Reduction r, size_t small_max_bytes) {
  return count * r.element_bytes <= std::min(small_max_bytes, ch.slot_bytes());
}

absl::Status SmallAllreduce::begin(const Deadline& deadline) {
  // An empty allreduce is no op on the channel: the backend's worker path
  // returns before it reaches the channel, and ranks that take different
  // paths for the same empty op must stay in step.
  if (count_ == 0) {
    done_ = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(ch_.health());
  ch_.begin_op({OpDescription::kAllreduce, count_ * r_.element_bytes, -1, r_.code});
  if (ch_.size() == 1) {
    done_ = true;
    return absl::OkStatus();
  }
  if (in_box_) return ch_.publish_box(data_, count_ * r_.element_bytes, deadline, &slot_, &copied_);
  RETURN_IF_ERROR(ch_.acquire_slot(/*will_write=*/true, deadline, &slot_));
  memcpy(ch_.slot(ch_.rank(), slot_), data_, count_ * r_.element_bytes);
  copied_ = ch_.post();
  return absl::OkStatus();
}

bool SmallAllreduce::peers_ready(std::chrono::nanoseconds spin, Channel::PollClock clock,
                                 int64_t* seen_at) {
  if (done_) return true;
  return in_box_ ? ch_.poll_boxes(slot_, copied_, spin, clock, seen_at)
                 : ch_.poll_all(copied_, spin);
}

absl::Status SmallAllreduce::finish_from_boxes(const Deadline& deadline) {
  const size_t nbytes = count_ * r_.element_bytes;
  RETURN_IF_ERROR(ch_.wait_boxes(slot_, copied_, nbytes, deadline));
  // In rank order, as from the slots: ((term 0 op term 1) op term 2) ...
  // This rank's term is its input itself (what its box holds), each peer's
  // its box, both read in place. A step writes the output once this rank's
  // input has been read (or is that step's operand, which the reduction
  // may overwrite); the steps before, on more than 2 ranks, write `partial`.
  // On 2 ranks that is one reduction and no copy.
  alignas(kCacheLine) uint8_t partial[kBoxBytes];
  const int me = ch_.rank(), n = ch_.size();
  auto term = [&](int k) -> const void* {
    return k == me ? data_ : ch_.box_data(k, slot_, nbytes);
  };
  const void* acc = term(0);
  for (int k = 1; k < n; ++k) {
    void* dst = k >= me ? data_ : partial;
    r_.fn(dst, acc, term(k), count_);
    acc = dst;
  }
  // A peer's next step follows its reads of this box (as of a slot below).
  ch_.release_box(slot_, copied_ + 1);
  ch_.prepare_next_box(slot_, nbytes);
  done_ = true;
  return absl::OkStatus();
}

absl::Status SmallAllreduce::finish(const Deadline& deadline) {
  if (done_) return absl::OkStatus();
  if (in_box_) return finish_from_boxes(deadline);
  RETURN_IF_ERROR(ch_.wait_all(copied_, deadline));
  // Every line of the peers' copies asked for at once: the reduction below
  // walks them in order, one miss after another. Only for a few KiB:
  // beyond, the hardware prefetcher keeps up and the requests only queue.
  const size_t nbytes = count_ * r_.element_bytes;
  const size_t ahead = nbytes <= kPrefetchMaxBytes ? nbytes : 0;
  for (int k = 0; k < ch_.size(); ++k) {
    if (k == ch_.rank()) continue;
    const uint8_t* theirs = ch_.slot(k, slot_);
    for (size_t i = 0; i < ahead; i += kCacheLine) _mm_prefetch(theirs + i, _MM_HINT_T0);
  }
  r_.fn(data_, ch_.slot(0, slot_), ch_.slot(1, slot_), count_);
  for (int k = 2; k < ch_.size(); ++k) r_.fn(data_, data_, ch_.slot(k, slot_), count_);
  // A peer's next step, in whatever chunk comes next, follows its reads of
  // this slot, so it frees the slot without a step of its own. The slot is
  // reused a chunk or more later, after this rank posted every step of the
  // chunks between (the peer's next step waits for nothing later). With
  // one slot that next chunk would be this slot's reuse: it posts here.
  ch_.release_slot(slot_, ch_.num_slots() > 1 ? copied_ + 1 : ch_.post());
  ch_.prepare_next_slot(ahead);
  done_ = true;
  return absl::OkStatus();
}

absl::Status allreduce(Channel& ch, void* data, size_t count, Reduction r,
                       const Deadline& deadline, size_t small_max_bytes) {
  if (SmallAllreduce::fits(ch, count, r, small_max_bytes)) {
    SmallAllreduce op(ch, data, count, r);
    RETURN_IF_ERROR(op.begin(deadline));
    return op.finish(deadline);
  }
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kAllreduce, count * r.element_bytes, -1, r.code});
  if (count == 0 || ch.size() == 1) return absl::OkStatus();
  return reduce_in_chunks(ch, data, count, r, /*root=*/-1, deadline);
}

absl::Status reduce(Channel& ch, void* data, size_t count, Reduction r, int root,
                    const Deadline& deadline) {
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kReduce, count * r.element_bytes, root, r.code});
  if (count == 0 || ch.size() == 1) return absl::OkStatus();
  return reduce_in_chunks(ch, data, count, r, root, deadline);
}

absl::Status broadcast(Channel& ch, void* data, size_t nbytes, int root,
                       const Deadline& deadline) {
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kBroadcast, nbytes, root, 0});
  if (ch.size() == 1) return absl::OkStatus();
  const bool is_root = ch.rank() == root;
  for (size_t offset = 0; offset < nbytes; offset += ch.slot_bytes()) {
    const size_t len = std::min(ch.slot_bytes(), nbytes - offset);
    int s;
    RETURN_IF_ERROR(ch.acquire_slot(is_root, deadline, &s));
    if (is_root) memcpy(ch.slot(root, s), at(data, offset), len);
    const uint32_t written = ch.post();
    if (!is_root) {
      RETURN_IF_ERROR(ch.wait_for(root, written, deadline));
      memcpy(at(data, offset), ch.slot(root, s), len);
    }
    ch.release_slot(s, ch.post());
  }
  return absl::OkStatus();
}

absl::Status allgather(Channel& ch, const void* in, void* out, size_t nbytes,
                       const Deadline& deadline) {
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kAllgather, nbytes, -1, 0});
  const int me = ch.rank(), n = ch.size();
  memmove(at(out, me * nbytes), in, nbytes);
  for (size_t offset = 0; offset < nbytes && n > 1; offset += ch.slot_bytes()) {
    const size_t len = std::min(ch.slot_bytes(), nbytes - offset);
    int s;
    RETURN_IF_ERROR(ch.acquire_slot(/*will_write=*/true, deadline, &s));
    memcpy(ch.slot(me, s), at(out, me * nbytes + offset), len);
    const uint32_t written = ch.post();
    for (int k = 1; k < n; ++k) {
      const int peer = (me + k) % n;
      RETURN_IF_ERROR(ch.wait_for(peer, written, deadline));
      memcpy(at(out, peer * nbytes + offset), ch.slot(peer, s), len);
    }
    ch.release_slot(s, ch.post());
  }
  return absl::OkStatus();
}

absl::Status reduce_scatter(Channel& ch, const void* in, void* out, size_t count, Reduction r,
                            const Deadline& deadline) {
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kReduceScatter, count * r.element_bytes, -1, r.code});
  const int me = ch.rank(), n = ch.size();
  const size_t e = r.element_bytes;
  if (n == 1) {
    memmove(out, in, count * e);
    return absl::OkStatus();
  }
  const size_t per_chunk = std::max<size_t>(1, ch.slot_bytes() / (n * e));
  const uint8_t* own_block = at(in, me * count * e);
  const bool own_block_overlaps_out = at(out, 0) < own_block + count * e &&
                                      own_block < at(out, count * e);
  for (size_t offset = 0; offset < count; offset += per_chunk) {
    const size_t len = std::min(per_chunk, count - offset);
    int s;
    RETURN_IF_ERROR(ch.acquire_slot(/*will_write=*/true, deadline, &s));
    // Block j of this chunk at j * len: the peers' blocks, and this rank's
    // own too where the output overlaps it (the reduction writes there).
    uint8_t* mine = ch.slot(me, s);
    for (int j = 0; j < n; ++j) {
      if (j != me || own_block_overlaps_out) {
        memcpy(mine + j * len * e, at(in, (j * count + offset) * e), len * e);
      }
    }
    const uint32_t written = ch.post();
    RETURN_IF_ERROR(ch.wait_all(written, deadline));
    auto block = [&](int rank) -> const void* {
      return rank == me && !own_block_overlaps_out ? at(in, (me * count + offset) * e)
                                                   : ch.slot(rank, s) + me * len * e;
    };
    uint8_t* dst = at(out, offset * e);
    r.fn(dst, block(0), block(1), len);
    for (int k = 2; k < n; ++k) r.fn(dst, dst, block(k), len);
    ch.release_slot(s, ch.post());
  }
  return absl::OkStatus();
}

absl::Status barrier(Channel& ch, const Deadline& deadline) {
  RETURN_IF_ERROR(ch.health());
  ch.begin_op({OpDescription::kBarrier, 0, -1, 0});
  if (ch.size() == 1) return absl::OkStatus();
  return ch.wait_all(ch.post(), deadline);
}

}  // namespace shm
}  // namespace ddpx
