#include "core/piece_layout.h"

#include <numeric>
#include <stdexcept>
#include <vector>

#include "gtest/gtest.h"

namespace ddpx {
namespace {

// 32-byte pieces of float32: 8 elements, two per slice when L = 4.
constexpr int64_t kPieceBytes = 32;

std::vector<float> counting(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

// The scratch is bytes; the pieces in it are float32.
float* floats(const Tensor& t) { return static_cast<float*>(t.data()); }

// `layout`'s pieces of the floats 1..n, over a fresh scratch.
struct Placed {
  Tensor data, scratch;
  std::vector<PieceLayout::Piece> pieces;
};
Placed place_counting(const PieceLayout& layout, int64_t n, bool own_slices) {
  Placed p;
  p.data = Tensor::from_vector<float>(counting(n));
  p.pieces = layout.place(p.data, p.scratch, own_slices);
  return p;
}

TEST(PieceLayout, PiecesAreMultiplesOfTheSliceCountAndOnlyTheLastPads) {
  const PieceLayout exact(24, 4, kPieceBytes, 4);
  EXPECT_EQ(exact.pieces(), 3);
  EXPECT_EQ(exact.per_piece(), 8);
  EXPECT_EQ(exact.length(2), 8);
  EXPECT_EQ(exact.slice(2), 2);
  EXPECT_FALSE(exact.pads_last());
  EXPECT_EQ(exact.scratch_bytes(true), 6 * 4);  // three slices of 2
  EXPECT_EQ(exact.scratch_bytes(false), 0);

  const PieceLayout ragged(21, 4, kPieceBytes, 4);
  EXPECT_EQ(ragged.pieces(), 3);
  EXPECT_EQ(ragged.length(0), 8);
  EXPECT_EQ(ragged.length(2), 5);
  EXPECT_EQ(ragged.slice(2), 2);  // 5 elements: 4 slices of 2, 3 of them padding
  EXPECT_TRUE(ragged.pads_last());
  EXPECT_EQ(ragged.scratch_bytes(true), (6 + 8) * 4);
  EXPECT_EQ(ragged.scratch_bytes(false), 8 * 4);
}

TEST(PieceLayout, APieceHoldsAtLeastOneElementPerSlice) {
  const PieceLayout layout(10, 4, /*piece_bytes=*/4, /*slices=*/3);
  EXPECT_EQ(layout.per_piece(), 3);
  EXPECT_EQ(layout.pieces(), 4);
  EXPECT_EQ(layout.length(3), 1);
  EXPECT_TRUE(layout.pads_last());
}

TEST(PieceLayout, WholePiecesStayInPlaceAndSlicesShareTheScratch) {
  const Placed placed = place_counting(PieceLayout(24, 4, kPieceBytes, 4), 24, true);
  ASSERT_EQ(placed.pieces.size(), 3u);
  ASSERT_TRUE(placed.scratch.defined());
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(floats(placed.pieces[p].whole), floats(placed.data) + 8 * p);
    EXPECT_EQ(placed.pieces[p].whole.numel(), 8);
    EXPECT_EQ(placed.pieces[p].mine.numel(), 2);
    // One after the other in the scratch.
    EXPECT_EQ(floats(placed.pieces[p].mine), floats(placed.scratch) + 2 * p);
  }
}

TEST(PieceLayout, TheLastPieceIsPaddedWithZerosAfterTheSlicesAndCopiedBack) {
  const PieceLayout layout(21, 4, kPieceBytes, 4);
  std::vector<float> values = counting(21);
  values.push_back(-1.0f);  // past the buffer: must stay untouched
  Tensor data = Tensor::from_blob(values.data(), {21}, DType::kFloat32);
  Tensor scratch;
  const std::vector<PieceLayout::Piece> placed = layout.place(data, scratch, true);
  ASSERT_EQ(placed.size(), 3u);
  const Tensor& last = placed[2].whole;
  ASSERT_EQ(last.numel(), 8);
  EXPECT_EQ(floats(last), floats(scratch) + 6);  // after the three slices
  EXPECT_EQ(last.to_float_vector(), (std::vector<float>{17, 18, 19, 20, 21, 0, 0, 0}));

  for (int i = 0; i < 8; ++i) floats(last)[i] = 100.0f + i;  // the collectives' result
  layout.copy_back(data, placed);
  EXPECT_EQ(std::vector<float>(values.begin() + 16, values.end()),
            (std::vector<float>{100, 101, 102, 103, 104, -1}));
  EXPECT_EQ(values[15], 16.0f);
}

TEST(PieceLayout, WithoutOwnSlicesMineIsTheWholePieceAndTheScratchOnlyPads) {
  const Placed placed = place_counting(PieceLayout(21, 4, kPieceBytes, 4), 21, false);
  ASSERT_EQ(placed.pieces.size(), 3u);
  EXPECT_EQ(floats(placed.pieces[0].mine), floats(placed.data));
  EXPECT_EQ(floats(placed.pieces[2].mine), floats(placed.pieces[2].whole));
  EXPECT_EQ(floats(placed.pieces[2].whole), floats(placed.scratch));
  EXPECT_EQ(static_cast<int64_t>(placed.scratch.nbytes()), 8 * 4);
}

TEST(PieceLayout, ALargeEnoughScratchIsReused) {
  const PieceLayout layout(24, 4, kPieceBytes, 4);
  Tensor scratch = Tensor::zeros({1024}, DType::kUInt8);
  void* before = scratch.data();
  Tensor data = Tensor::from_vector<float>(counting(24));
  layout.place(data, scratch, true);
  EXPECT_EQ(scratch.data(), before);
}

TEST(PieceLayout, AnEmptyBufferHasNoPieces) {
  const PieceLayout layout(0, 4, kPieceBytes, 4);
  EXPECT_EQ(layout.pieces(), 0);
  EXPECT_FALSE(layout.pads_last());
  EXPECT_EQ(layout.scratch_bytes(true), 0);
  Tensor data = Tensor::zeros({0}, DType::kFloat32);
  Tensor scratch;
  EXPECT_TRUE(layout.place(data, scratch, true).empty());
  EXPECT_FALSE(scratch.defined());
}

// The int8 pipeline's layout: pieces of given lengths (short ones at the
// ends), placed like equal ones: whole pieces in place at their starts,
// own slices back to back in the scratch, the padded last piece after them.
TEST(PieceLayout, GivenLengthsArePlacedAtTheirStarts) {
  const PieceLayout layout({4, 8, 4, 3}, 4, 2);
  EXPECT_EQ(layout.pieces(), 4);
  EXPECT_EQ(layout.begin(2), 12);
  EXPECT_EQ(layout.length(3), 3);
  EXPECT_EQ(layout.slice(1), 4);
  EXPECT_TRUE(layout.pads_last());
  EXPECT_EQ(layout.scratch_bytes(true), (2 + 4 + 2 + 2 + 4) * 4);
  const Placed placed = place_counting(layout, 19, true);
  EXPECT_EQ(floats(placed.pieces[2].whole), floats(placed.data) + 12);
  EXPECT_EQ(floats(placed.pieces[2].mine), floats(placed.scratch) + 6);
  const Tensor& last = placed.pieces[3].whole;
  EXPECT_EQ(floats(last), floats(placed.scratch) + 10);
  EXPECT_EQ(last.to_float_vector(), (std::vector<float>{17, 18, 19, 0}));
  floats(last)[0] = -1.0f;
  layout.copy_back(placed.data, placed.pieces);
  EXPECT_EQ(placed.data.to_float_vector()[16], -1.0f);

  const PieceLayout empty_bucket({0}, 4, 2);  // one piece of nothing
  EXPECT_EQ(empty_bucket.pieces(), 1);
  EXPECT_FALSE(empty_bucket.pads_last());
  try {
    PieceLayout({4, 3, 2}, 4, 2);
    FAIL() << "no error for a middle piece that does not divide into slices";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("piece 1 of 3 elements"), std::string::npos)
        << e.what();
  }
}

TEST(PieceLayout, BadSizesAreNamed) {
  try {
    PieceLayout(8, 4, kPieceBytes, 0);
    FAIL() << "no error for zero slices";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("slices > 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(got 8, 4, 32, 0)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PieceLayout(-1, 4, kPieceBytes, 2), std::invalid_argument);
}

}  // namespace
}  // namespace ddpx
