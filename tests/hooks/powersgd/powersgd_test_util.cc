#include "tests/hooks/powersgd/powersgd_test_util.h"

#include "hooks/powersgd_random.h"

namespace ddpx {
namespace powersgd_test {

int64_t total_numel(const std::vector<Shape>& shapes) {
  int64_t n = 0;
  for (const Shape& s : shapes) n += shape_numel(s);
  return n;
}

GradBucket make_bucket(size_t index, bool is_last,
                       const std::vector<Shape>& shapes,
                       const std::vector<float>& values) {
  Tensor buffer = Tensor::from_vector(values);
  std::vector<int64_t> offsets;
  std::vector<Tensor> parameters;
  int64_t at = 0;
  for (const Shape& s : shapes) {
    offsets.push_back(at);
    parameters.push_back(Tensor::zeros(s, DType::kFloat32));
    at += shape_numel(s);
  }
  return GradBucket(index, is_last, buffer, offsets, shapes, parameters);
}

std::vector<float> golden_input(int64_t numel, int iteration, int rank) {
  std::vector<float> v(numel);
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t k = (i * 37 + iteration * 11 + rank * 5 + (i * i) % 7) % 29 - 14;
    v[i] = static_cast<float>(k) / 8.0f;
  }
  return v;
}

std::vector<float> golden_q_init(int64_t numel) {
  std::vector<float> v(numel);
  for (int64_t j = 0; j < numel; ++j)
    v[j] = static_cast<float>((j * 13 + 7) % 17 - 8) / 4.0f;
  return v;
}

std::vector<float> random_input(int64_t numel, uint64_t seed, int rank,
                                int iteration) {
  std::vector<float> v(numel);
  fill_standard_normal(v.data(), numel,
                       seed * 1000003 + uint64_t(rank) * 7919 + iteration);
  return v;
}

}  // namespace powersgd_test
}  // namespace ddpx
