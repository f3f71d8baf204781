#include "examples/data/fashion_mnist.h"

#include <sys/stat.h>

#include "examples/data/idx.h"

namespace ddpx::data {

absl::StatusOr<Dataset> dataset_from_idx(const std::string& images_path,
                                         const std::string& labels_path,
                                         int64_t max_images) {
  absl::StatusOr<IdxArray> images = read_idx_u8(images_path, max_images);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = read_idx_u8(labels_path, max_images);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3) {
    return absl::InvalidArgumentError(images_path + ": images must have 3 dimensions "
                                      "[count, rows, cols], found " +
                                      std::to_string(images->dims.size()));
  }
  if (labels->dims.size() != 1 || labels->dims[0] != images->dims[0]) {
    return absl::InvalidArgumentError(
        labels_path + ": expected 1-d labels for " + std::to_string(images->dims[0]) +
        " images from " + images_path);
  }
  Dataset d;
  d.size = images->dims[0];
  d.features = images->dims[1] * images->dims[2];
  d.images.resize(images->bytes.size());
  for (size_t i = 0; i < images->bytes.size(); ++i) {
    d.images[i] = (images->bytes[i] / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  d.labels.resize(static_cast<size_t>(d.size));
  for (int64_t i = 0; i < d.size; ++i) {
    const uint8_t label = labels->bytes[i];
    if (label >= 10) {
      return absl::InvalidArgumentError(labels_path + ": label " + std::to_string(label) +
                                        " at index " + std::to_string(i) +
                                        " is not a class in [0, 10)");
    }
    d.labels[i] = label;
  }
  return d;
}

absl::StatusOr<Dataset> load_fashion_mnist(const std::string& dir, Split split,
                                           int64_t max_images) {
  const std::string prefix = dir + "/" + (split == Split::kTrain ? "train" : "t10k");
  const std::string images = prefix + "-images-idx3-ubyte.gz";
  const std::string labels = prefix + "-labels-idx1-ubyte.gz";
  for (const std::string& path : {images, labels}) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(
          "Fashion-MNIST file " + path + " is missing; install Debian's "
          "dataset-fashion-mnist package (apt-get install dataset-fashion-mnist) "
          "or point --data_dir at a folder holding the IDX .gz files");
    }
  }
  return dataset_from_idx(images, labels, max_images);
}

}  // namespace ddpx::data
