#include "core/piece_layout.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace ddpx {
namespace {

int64_t round_up_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

PieceLayout::PieceLayout(int64_t elements, int64_t element_bytes, int64_t piece_bytes,
                         int64_t slices)
    : elements_(elements), element_bytes_(element_bytes), slices_(slices) {
  if (elements < 0 || element_bytes <= 0 || piece_bytes <= 0 || slices <= 0) {
    throw std::invalid_argument(
        "PieceLayout: elements must be >= 0 and element bytes, piece bytes and slices > 0 (got " +
        std::to_string(elements) + ", " + std::to_string(element_bytes) + ", " +
        std::to_string(piece_bytes) + ", " + std::to_string(slices) + ")");
  }
  per_piece_ = std::max(slices, piece_bytes / element_bytes / slices * slices);
  pieces_ = round_up_div(elements, per_piece_);
}

PieceLayout::PieceLayout(std::vector<int64_t> lengths, int64_t element_bytes, int64_t slices)
    : elements_(0),
      element_bytes_(element_bytes),
      slices_(slices),
      per_piece_(0),
      pieces_(static_cast<int64_t>(lengths.size())),
      lengths_(std::move(lengths)) {
  if (element_bytes <= 0 || slices <= 0) {
    throw std::invalid_argument("PieceLayout: element bytes and slices must be > 0 (got " +
                                std::to_string(element_bytes) + ", " + std::to_string(slices) +
                                ")");
  }
  for (int64_t p = 0; p < pieces_; ++p) {
    const int64_t n = lengths_[p];
    if (n < 0 || (p + 1 < pieces_ && n % slices != 0)) {
      throw std::invalid_argument("PieceLayout: piece " + std::to_string(p) + " of " +
                                  std::to_string(n) +
                                  " elements (every piece >= 0, all but the last a multiple of " +
                                  std::to_string(slices) + " slices)");
    }
    begins_.push_back(elements_);
    elements_ += n;
  }
}

int64_t PieceLayout::length(int64_t p) const {
  if (!lengths_.empty()) return lengths_[p];
  return p + 1 < pieces_ ? per_piece_ : elements_ - (pieces_ - 1) * per_piece_;
}

int64_t PieceLayout::begin(int64_t p) const {
  return begins_.empty() ? p * per_piece_ : begins_[p];
}

int64_t PieceLayout::slice(int64_t p) const { return round_up_div(length(p), slices_); }

bool PieceLayout::pads_last() const {
  return pieces_ > 0 && slice(pieces_ - 1) * slices_ != length(pieces_ - 1);
}

int64_t PieceLayout::scratch_bytes(bool own_slices) const {
  if (pieces_ == 0) return 0;
  const int64_t last_slice = slice(pieces_ - 1);
  // Every piece but the last divides into equal slices.
  const int64_t own = own_slices ? (elements_ - length(pieces_ - 1)) / slices_ + last_slice : 0;
  const int64_t padded = pads_last() ? last_slice * slices_ : 0;
  return (own + padded) * element_bytes_;
}

std::vector<PieceLayout::Piece> PieceLayout::place(const Tensor& data, Tensor& scratch,
                                                   bool own_slices) const {
  const int64_t needed = scratch_bytes(own_slices);
  if (needed > 0 && (!scratch.defined() || static_cast<int64_t>(scratch.nbytes()) < needed)) {
    scratch = Tensor::zeros({needed}, DType::kUInt8);
  }
  auto* base = static_cast<uint8_t*>(data.data());
  auto* slices_at = needed > 0 ? static_cast<uint8_t*>(scratch.data()) : nullptr;
  std::vector<Piece> placed(pieces_);
  int64_t slice_offset = 0;
  for (int64_t p = 0; p < pieces_; ++p) {
    const int64_t length = this->length(p), slice = this->slice(p);
    uint8_t* in_place = base + begin(p) * element_bytes_;
    if (slice * slices_ == length) {
      placed[p].whole = Tensor::from_blob(in_place, {length}, data.dtype());
    } else {  // only the last piece; its copy follows the slices
      uint8_t* padded = slices_at + needed - slice * slices_ * element_bytes_;
      memcpy(padded, in_place, length * element_bytes_);
      memset(padded + length * element_bytes_, 0, (slice * slices_ - length) * element_bytes_);
      placed[p].whole = Tensor::from_blob(padded, {slice * slices_}, data.dtype());
    }
    placed[p].mine = own_slices ? Tensor::from_blob(slices_at + slice_offset * element_bytes_,
                                                    {slice}, data.dtype())
                                : placed[p].whole;
    slice_offset += slice;
  }
  return placed;
}

void PieceLayout::copy_back(const Tensor& data, const std::vector<Piece>& placed) const {
  if (!pads_last()) return;
  const int64_t last = pieces_ - 1;
  memcpy(static_cast<uint8_t*>(data.data()) + begin(last) * element_bytes_,
         placed[last].whole.data(), length(last) * element_bytes_);
}

}  // namespace ddpx
