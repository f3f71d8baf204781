// A flat buffer cut into pieces for a pipelined reduce-scatter / allgather:
// while one piece crosses the slow link, the next is reduce-scattered and
// the previous gathered. The Gloo two-level allreduce cuts equal pieces; the
// int8 hook's pipeline gives its own lengths, short pieces at both ends to
// shorten what no other piece hides (Int8Pipeline::piece_lengths).
//
// Every piece but the last holds a multiple of the L ranks that
// reduce-scatter it, so only the last piece may need padding to L equal
// slices. This rank's slice of every piece lives in one scratch
// buffer, followed by the zero-padded copy of the last piece when it needs
// one (the padding is reduced with padding only and never copied back).
#ifndef DDPX_CORE_PIECE_LAYOUT_H_
#define DDPX_CORE_PIECE_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ddpx {

class PieceLayout {
 public:
  // `elements` of `element_bytes` each, in pieces of about `piece_bytes`
  // (at least `slices` elements), each cut into `slices` >= 1 slices. An
  // empty buffer has no pieces.
  PieceLayout(int64_t elements, int64_t element_bytes, int64_t piece_bytes, int64_t slices);
  // Pieces of the given lengths, in order: each >= 0, every one but the last
  // a multiple of `slices`; the buffer holds their sum.
  PieceLayout(std::vector<int64_t> lengths, int64_t element_bytes, int64_t slices);

  int64_t pieces() const { return pieces_; }
  // Elements of every piece but the last, a multiple of slices(), for equal
  // pieces (the first constructor).
  int64_t per_piece() const { return per_piece_; }
  int64_t slices() const { return slices_; }
  // Elements of piece `p`, and of each of its slices (rounded up); where
  // it starts in the buffer.
  int64_t length(int64_t p) const;
  int64_t begin(int64_t p) const;
  int64_t slice(int64_t p) const;
  // Whether the last piece does not divide into slices() equal slices.
  bool pads_last() const;

  // Scratch bytes place() needs: this rank's slices when `own_slices`, then
  // the padded last piece when pads_last().
  int64_t scratch_bytes(bool own_slices) const;

  struct Piece {
    Tensor whole;  // the piece in the buffer, or its padded copy: slices() * slice(p) elements
    Tensor mine;   // this rank's slice in the scratch; `whole` itself without own slices
  };
  // Views of `data`'s pieces over `data` and `scratch`, which holds
  // scratch_bytes(own_slices) bytes (grown here as uint8 when smaller). The
  // last piece's padded copy is filled from `data` now.
  std::vector<Piece> place(const Tensor& data, Tensor& scratch, bool own_slices) const;
  // Once the collectives are done: the padded last piece's result back
  // into `data` (nothing when !pads_last()).
  void copy_back(const Tensor& data, const std::vector<Piece>& placed) const;

 private:
  int64_t elements_, element_bytes_, slices_, per_piece_, pieces_;
  // Given lengths and their starts (empty for equal pieces).
  std::vector<int64_t> lengths_, begins_;
};

}  // namespace ddpx

#endif  // DDPX_CORE_PIECE_LAYOUT_H_
