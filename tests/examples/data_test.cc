// IDX reading on the real Fashion-MNIST files and on files written here, and
// the per-rank sampler's DistributedSampler semantics.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "examples/data/fashion_mnist.h"
#include "examples/data/idx.h"
#include "examples/data/sampler.h"
#include "gtest/gtest.h"

namespace ddpx::data {
namespace {

std::string temp_path(const std::string& name) {
  const char* dir = getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(IdxTest, ReadsWhatWasWritten) {
  IdxArray a{{2, 3}, {1, 2, 3, 4, 5, 255}};
  const std::string path = temp_path("small.idx");
  ASSERT_TRUE(write_idx_u8(path, a).ok());
  absl::StatusOr<IdxArray> b = read_idx_u8(path);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dims, a.dims);
  EXPECT_EQ(b->bytes, a.bytes);
}

TEST(IdxTest, BadMagicIsAClearError) {
  const std::string path = temp_path("bad_magic.idx");
  std::ofstream(path) << "PK\x03\x04 this is a zip file, not IDX";
  absl::StatusOr<IdxArray> r = read_idx_u8(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("not an IDX file"), std::string::npos) << r.status();
}

TEST(IdxTest, TruncatedDataNamesHowMuchCame) {
  IdxArray a{{4, 4}, std::vector<uint8_t>(16, 7)};
  const std::string path = temp_path("truncated.idx");
  ASSERT_TRUE(write_idx_u8(path, a).ok());
  ASSERT_EQ(truncate(path.c_str(), 4 + 8 + 10), 0);
  absl::StatusOr<IdxArray> r = read_idx_u8(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("10 of 16 bytes"), std::string::npos) << r.status();
}

TEST(IdxTest, UnsupportedTypeIsRejected) {
  const std::string path = temp_path("float.idx");
  std::ofstream(path) << std::string("\0\0\x0d\x01\0\0\0\x01xxxx", 12);
  absl::StatusOr<IdxArray> r = read_idx_u8(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not supported"), std::string::npos) << r.status();
}

TEST(FashionMnistTest, MissingDirectoryNamesPathAndPackage) {
  absl::StatusOr<Dataset> r = load_fashion_mnist("/nonexistent/fmnist", Split::kTest);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/fmnist/t10k-images-idx3-ubyte.gz"),
            std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("apt-get install dataset-fashion-mnist"),
            std::string::npos) << r.status();
}

TEST(FashionMnistTest, SmallHandWrittenDatasetIsNormalized) {
  const std::string images = temp_path("img.idx"), labels = temp_path("lbl.idx");
  ASSERT_TRUE(write_idx_u8(images, {{2, 1, 2}, {0, 255, 51, 102}}).ok());
  ASSERT_TRUE(write_idx_u8(labels, {{2}, {3, 9}}).ok());
  absl::StatusOr<Dataset> d = dataset_from_idx(images, labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size, 2);
  EXPECT_EQ(d->features, 2);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 9}));
  EXPECT_NEAR(d->images[0], -kFashionMnistMean / kFashionMnistStd, 1e-6);
  EXPECT_NEAR(d->images[1], (1 - kFashionMnistMean) / kFashionMnistStd, 1e-6);
  EXPECT_NEAR(d->images[2], (0.2f - kFashionMnistMean) / kFashionMnistStd, 1e-6);
  // A label outside [0, 10) and mismatched counts are errors.
  ASSERT_TRUE(write_idx_u8(labels, {{2}, {3, 10}}).ok());
  EXPECT_FALSE(dataset_from_idx(images, labels).ok());
  ASSERT_TRUE(write_idx_u8(labels, {{3}, {1, 2, 3}}).ok());
  EXPECT_FALSE(dataset_from_idx(images, labels).ok());
}

TEST(FashionMnistTest, RealTestSplitFromDebianPackage) {
  absl::StatusOr<Dataset> d = load_fashion_mnist(kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size, 10000);
  EXPECT_EQ(d->features, 784);
  // The test split is balanced: 1000 images per class.
  std::vector<int> per_class(10, 0);
  for (int32_t l : d->labels) per_class[l]++;
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << c;
  // Normalized pixels have mean ~0 and std ~1 (constants are the train set's).
  double sum = 0, sq = 0;
  for (float v : d->images) sum += v, sq += double(v) * v;
  const double n = static_cast<double>(d->images.size());
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq / n - (sum / n) * (sum / n)), 1.0, 0.05);
}

TEST(FashionMnistTest, MaxImagesLoadsTheFirstImagesOnly) {
  absl::StatusOr<Dataset> all = load_fashion_mnist(kDefaultFashionMnistDir, Split::kTest);
  absl::StatusOr<Dataset> first = load_fashion_mnist(kDefaultFashionMnistDir, Split::kTest, 37);
  ASSERT_TRUE(all.ok() && first.ok());
  EXPECT_EQ(first->size, 37);
  ASSERT_EQ(first->images.size(), 37u * 784);
  EXPECT_TRUE(std::equal(first->images.begin(), first->images.end(), all->images.begin()));
  EXPECT_TRUE(std::equal(first->labels.begin(), first->labels.end(), all->labels.begin()));
  // More than the file holds: the whole file.
  EXPECT_EQ(load_fashion_mnist(kDefaultFashionMnistDir, Split::kTest, 20000)->size, 10000);
}

TEST(SamplerTest, ShardsAreEqualDisjointAndCoverTheDataset) {
  const int64_t n = 103;
  const int world = 4;
  std::multiset<int64_t> all;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, /*seed=*/7);
    std::vector<int64_t> idx = s.indices(0);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), 26);
    all.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(all.size(), 104u);  // 103 plus one padding sample
  for (int64_t i = 0; i < n; ++i) EXPECT_GE(all.count(i), 1u) << i;
}

TEST(SamplerTest, ShuffleDependsOnEpochAndSeedOnly) {
  DistributedSampler a(1000, 1, 2, 5), b(1000, 1, 2, 5), c(1000, 1, 2, 6);
  EXPECT_EQ(a.indices(3), b.indices(3));
  EXPECT_NE(a.indices(3), a.indices(4));
  EXPECT_NE(a.indices(3), c.indices(3));
  DistributedSampler ordered(10, 1, 2, 5, /*shuffle=*/false);
  EXPECT_EQ(ordered.indices(0), (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

}  // namespace
}  // namespace ddpx::data
