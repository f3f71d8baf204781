// Fashion-MNIST as Debian's dataset-fashion-mnist installs it:
// /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
#ifndef DDPX_EXAMPLES_DATA_FASHION_MNIST_H_
#define DDPX_EXAMPLES_DATA_FASHION_MNIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpx::data {

inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
// Per-pixel normalization after scaling to [0, 1]: the training set's mean
// and standard deviation (the usual torchvision Normalize constants).
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct Dataset {
  int64_t size = 0;
  int64_t features = 0;       // 784
  std::vector<float> images;  // [size, features], normalized
  std::vector<int32_t> labels;
};

enum class Split { kTrain, kTest };

// Loads one split from `dir` ("train" or "t10k" files). A missing file gives
// NotFound naming the path and the Debian package that provides it.
// With max_images >= 0 only the first max_images are loaded.
absl::StatusOr<Dataset> load_fashion_mnist(const std::string& dir, Split split,
                                           int64_t max_images = -1);

// Images [n, rows, cols] and labels [n] as IDX arrays -> normalized Dataset;
// checks that the counts agree and labels are < 10.
absl::StatusOr<Dataset> dataset_from_idx(const std::string& images_path,
                                         const std::string& labels_path,
                                         int64_t max_images = -1);

}  // namespace ddpx::data

#endif  // DDPX_EXAMPLES_DATA_FASHION_MNIST_H_
