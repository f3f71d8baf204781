#include "hooks/bucket_math.h"

#include "absl/strings/str_cat.h"
#include "hooks/kernels/cpu_kernels.h"
#include "process_group/half.h"

namespace ddpx {
namespace {

absl::Status unsupported(const std::string& what, const char* action, DType from,
                         DType to) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": cannot ", action, " ", dtype_name(from), " to ", dtype_name(to),
      " (supported: float32 <-> float16/bfloat16, or equal dtypes)"));
}

uint16_t* bits16(const Tensor& t) { return static_cast<uint16_t*>(t.data()); }

}  // namespace

absl::Status check_cpu(const Tensor& t, const std::string& what) {
  if (!t.defined()) return absl::InvalidArgumentError(what + ": bucket buffer is undefined");
  if (!t.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": buffer ", t.str(), " is not on the CPU; these hooks run on CPU tensors"));
  }
  return absl::OkStatus();
}

absl::Status divide_in_place(const Tensor& t, int divisor, const std::string& what) {
  if (absl::Status s = check_cpu(t, what); !s.ok()) return s;
  if (!is_floating_point(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot average a ", dtype_name(t.dtype()),
        " bucket (floating dtypes only)"));
  }
  if (divisor == 1) return absl::OkStatus();
  const int64_t n = t.numel();
  const float fd = static_cast<float>(divisor);
  switch (t.dtype()) {
    case DType::kFloat32:
      kernels::divide(t.data_as<float>(), n, fd);
      return absl::OkStatus();
    case DType::kFloat64: {
      double* d = t.data_as<double>();
      for (int64_t i = 0; i < n; ++i) d[i] /= divisor;
      return absl::OkStatus();
    }
    case DType::kFloat16: {
      uint16_t* h = bits16(t);
      for (int64_t i = 0; i < n; ++i) h[i] = float_to_half_bits(half_bits_to_float(h[i]) / fd);
      return absl::OkStatus();
    }
    case DType::kBFloat16: {
      uint16_t* b = bits16(t);
      for (int64_t i = 0; i < n; ++i)
        b[i] = float_to_bfloat16_bits(bfloat16_bits_to_float(b[i]) / fd);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": cannot average a ", dtype_name(t.dtype()),
          " bucket (floating dtypes only)"));
  }
}

absl::StatusOr<Tensor> cast_divided(const Tensor& src, DType dtype, int divisor,
                                    const std::string& what) {
  if (absl::Status s = check_cpu(src, what); !s.ok()) return s;
  if (src.dtype() == dtype) {
    Tensor copy = src.flatten().clone();
    if (absl::Status s = divide_in_place(copy, divisor, what); !s.ok()) return s;
    return copy;
  }
  if (src.dtype() != DType::kFloat32 ||
      (dtype != DType::kFloat16 && dtype != DType::kBFloat16)) {
    return unsupported(what, "cast", src.dtype(), dtype);
  }
  Tensor out = Tensor::zeros({src.numel()}, dtype);
  const float fd = static_cast<float>(divisor);
  if (dtype == DType::kFloat16) {
    kernels::float_to_half(src.data_as<float>(), bits16(out), src.numel(), fd);
  } else {
    kernels::float_to_bfloat16(src.data_as<float>(), bits16(out), src.numel(), fd);
  }
  return out;
}

absl::Status copy_converted(const Tensor& dst, const Tensor& src,
                            const std::string& what) {
  if (absl::Status s = check_cpu(dst, what); !s.ok()) return s;
  if (absl::Status s = check_cpu(src, what); !s.ok()) return s;
  if (dst.dtype() == src.dtype()) return dst.copy_from(src);
  if (absl::Status s = check_numel(src, dst.numel(), what); !s.ok()) return s;
  if (dst.dtype() != DType::kFloat32) return unsupported(what, "convert", src.dtype(), dst.dtype());
  if (src.dtype() == DType::kFloat16) {
    kernels::half_to_float(bits16(src), dst.data_as<float>(), src.numel());
  } else if (src.dtype() == DType::kBFloat16) {
    kernels::bfloat16_to_float(bits16(src), dst.data_as<float>(), src.numel());
  } else {
    return unsupported(what, "convert", src.dtype(), dst.dtype());
  }
  return absl::OkStatus();
}

}  // namespace ddpx
