#include "core/dtype.h"

namespace ddpx {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

bool is_floating_point(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 ||
         dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

std::string Device::str() const {
  if (type == Type::kCPU) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace ddpx
