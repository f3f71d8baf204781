// Which gradients share a bucket: order, caps, the small first bucket, dtype
// and device grouping, and the flat buffers built from an assignment.
#include "reducer/bucket_assignment.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reducer/flat_buckets.h"

namespace ddpx {
namespace {

using ::testing::ElementsAre;

GradientSpec f32(int64_t numel) { return {numel, DType::kFloat32, Device::cpu()}; }
GradientSpec f16(int64_t numel) { return {numel, DType::kFloat16, Device::cpu()}; }

std::vector<std::vector<size_t>> members(const std::vector<BucketSpec>& buckets) {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets) out.push_back(b.gradients);
  return out;
}

TEST(BucketAssignment, ReverseRegistrationOrderFillsBucketsUpToTheCap) {
  // Five 100-byte gradients, 250-byte cap: a bucket closes at >= 250 bytes.
  std::vector<GradientSpec> grads(5, f32(25));
  auto buckets = compute_bucket_assignment(grads, reverse_order(5), {250});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets), ElementsAre(ElementsAre(4, 3, 2), ElementsAre(1, 0)));
  EXPECT_EQ((*buckets)[0].size_limit_bytes, 250u);
}

TEST(BucketAssignment, FirstBucketUsesTheSmallerFirstCap) {
  std::vector<GradientSpec> grads(6, f32(25));  // 100 bytes each
  auto buckets = compute_bucket_assignment(grads, reverse_order(6), {100, 300});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets),
              ElementsAre(ElementsAre(5), ElementsAre(4, 3, 2), ElementsAre(1, 0)));
  EXPECT_EQ((*buckets)[0].size_limit_bytes, 100u);
  EXPECT_EQ((*buckets)[1].size_limit_bytes, 300u);
  EXPECT_EQ((*buckets)[2].size_limit_bytes, 300u);
}

TEST(BucketAssignment, DefaultCapsInMebibytes) {
  EXPECT_EQ(mb_to_bytes(25), 25u * 1024 * 1024);
  EXPECT_EQ(mb_to_bytes(1), 1024u * 1024);
  // The last gradient (4 MiB) alone fills the 1 MiB first bucket; the three
  // 12 MiB ones share a 25 MiB bucket, which closes once it reaches 25 MiB.
  std::vector<GradientSpec> grads = {f32(3 << 20), f32(3 << 20), f32(3 << 20), f32(1 << 20)};
  auto buckets = compute_bucket_assignment(grads, reverse_order(4), {mb_to_bytes(1), mb_to_bytes(25)});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets), ElementsAre(ElementsAre(3), ElementsAre(2, 1, 0)));
}

TEST(BucketAssignment, OneLargeGradientGetsItsOwnBucket) {
  std::vector<GradientSpec> grads = {f32(10), f32(1000), f32(10)};
  auto buckets = compute_bucket_assignment(grads, reverse_order(3), {200});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets), ElementsAre(ElementsAre(2, 1), ElementsAre(0)));
}

TEST(BucketAssignment, DtypesNeverShareABucketAndEachHasItsOwnFirstCap) {
  // Interleaved float32 (100 B) and float16 (50 B) gradients.
  std::vector<GradientSpec> grads = {f32(25), f16(25), f32(25), f16(25), f32(25), f16(25)};
  auto buckets = compute_bucket_assignment(grads, reverse_order(6), {100, 1000});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  // float16 first bucket fills at 100 B (two gradients), float32's at one.
  // Ordered by when their first gradient is expected: 5 (f16), 4 (f32), ...
  EXPECT_THAT(members(*buckets),
              ElementsAre(ElementsAre(5, 3), ElementsAre(4), ElementsAre(2, 0), ElementsAre(1)));
}

TEST(BucketAssignment, DevicesNeverShareABucket) {
  std::vector<GradientSpec> grads = {f32(1), {1, DType::kFloat32, Device::cuda(0)}, f32(1)};
  auto buckets = compute_bucket_assignment(grads, reverse_order(3), {1 << 20});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets), ElementsAre(ElementsAre(2, 0), ElementsAre(1)));
}

TEST(BucketAssignment, FollowsAGivenReadyOrder) {
  std::vector<GradientSpec> grads(4, f32(25));
  auto buckets = compute_bucket_assignment(grads, {1, 3, 0, 2}, {200});
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  EXPECT_THAT(members(*buckets), ElementsAre(ElementsAre(1, 3), ElementsAre(0, 2)));
}

TEST(BucketAssignment, RejectsBadOrdersAndLimits) {
  std::vector<GradientSpec> grads(3, f32(1));
  auto dup = compute_bucket_assignment(grads, {0, 1, 1}, {100});
  EXPECT_THAT(dup.status().message(), ::testing::HasSubstr("index 1 appears twice"));
  auto range = compute_bucket_assignment(grads, {0, 1, 7}, {100});
  EXPECT_THAT(range.status().message(), ::testing::HasSubstr("index 7 out of range"));
  auto short_order = compute_bucket_assignment(grads, {0, 1}, {100});
  EXPECT_THAT(short_order.status().message(), ::testing::HasSubstr("lists 2 gradients, expected 3"));
  auto no_limit = compute_bucket_assignment(grads, {0, 1, 2}, {});
  EXPECT_THAT(no_limit.status().message(), ::testing::HasSubstr("no bucket size limit"));
}

TEST(FlatBuckets, ViewsAreConsecutiveSlicesOfOneBuffer) {
  std::vector<Tensor> tensors = {Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}),
                                 Tensor::from_vector<float>({7, 8}),
                                 Tensor::from_vector<float>({9})};
  auto buckets = make_flat_buckets({BucketSpec{{2, 0}, 100}, BucketSpec{{1}, 100}}, tensors);
  ASSERT_TRUE(buckets.ok()) << buckets.status();
  const FlatBucket& b = (*buckets)[0];
  EXPECT_THAT(b.offsets, ElementsAre(0, 1));
  EXPECT_EQ(b.buffer.numel(), 7);
  EXPECT_EQ(b.views[1].shape(), (Shape{2, 3}));
  EXPECT_TRUE(b.views[1].shares_storage_with(b.buffer));
  ASSERT_TRUE(copy_into_bucket(b, tensors).ok());
  EXPECT_THAT(b.buffer.to_float_vector(), ElementsAre(9, 1, 2, 3, 4, 5, 6));
  b.buffer.fill_(0.5);
  ASSERT_TRUE(copy_out_of_bucket(b, tensors).ok());
  EXPECT_THAT(tensors[0].to_float_vector(), ElementsAre(0.5, 0.5, 0.5, 0.5, 0.5, 0.5));
  EXPECT_THAT(tensors[1].to_float_vector(), ElementsAre(7, 8));  // other bucket
}

TEST(FlatBuckets, RejectsMixedDtypes) {
  std::vector<Tensor> tensors = {Tensor::zeros({2}, DType::kFloat32), Tensor::zeros({2}, DType::kFloat64)};
  auto buckets = make_flat_buckets({BucketSpec{{0, 1}, 100}}, tensors);
  EXPECT_THAT(buckets.status().message(), ::testing::HasSubstr("mixes float32[2] on cpu and float64[2]"));
}

}  // namespace
}  // namespace ddpx
