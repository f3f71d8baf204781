// Element types and devices of tensors.
#ifndef DDPX_CORE_DTYPE_H_
#define DDPX_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddpx {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
};

size_t dtype_size(DType dtype);
// "float32", "bfloat16", ...
const char* dtype_name(DType dtype);
bool is_floating_point(DType dtype);

// Maps a C++ element type to its DType (float, double, int8_t, uint8_t,
// int32_t, int64_t; the 16-bit floats are Half and BFloat16 in half.h).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };

struct Device {
  enum class Type : uint8_t { kCPU, kCUDA };
  Type type = Type::kCPU;
  int index = -1;  // CUDA ordinal; -1 on the CPU.

  static Device cpu() { return Device{}; }
  static Device cuda(int index) { return Device{Type::kCUDA, index}; }
  bool is_cpu() const { return type == Type::kCPU; }
  bool is_cuda() const { return type == Type::kCUDA; }
  // "cpu", "cuda:0".
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

}  // namespace ddpx

#endif  // DDPX_CORE_DTYPE_H_
