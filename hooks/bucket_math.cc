#include "hooks/bucket_math.h"

#include "absl/strings/str_cat.h"
#include "hooks/kernels/cpu_kernels.h"
#include "core/half.h"

namespace ddpx {
namespace {

absl::Status unsupported(const std::string& what, const char* action, DType from,
                         DType to) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": cannot ", action, " ", dtype_name(from), " to ", dtype_name(to),
      " (supported: float32 <-> float16/bfloat16, or equal dtypes)"));
}

uint16_t* bits16(const Tensor& t) { return static_cast<uint16_t*>(t.data()); }

bool is_16bit_float(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

// cast_divided for a buffer on a device: one cast kernel, no division.
absl::StatusOr<Tensor> cast_on_device(const Tensor& src, DType dtype, int divisor,
                                      const std::string& what) {
  absl::StatusOr<DeviceKernels*> k = kernels_for(src, what);
  if (!k.ok()) return k.status();
  if (divisor != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot divide ", src.str(), " by ", divisor,
        " on the device (DeviceKernels has no division; divide in the collective with "
        "ReduceOp::AVG)"));
  }
  const bool narrowing = src.dtype() == DType::kFloat32 && is_16bit_float(dtype);
  if (src.dtype() != dtype && !narrowing) return unsupported(what, "cast", src.dtype(), dtype);
  absl::StatusOr<Tensor> out = Tensor::empty({src.numel()}, dtype, src.device());
  if (!out.ok()) return out.status();
  if (narrowing) {
    if (absl::Status s = (*k)->cast(src.flatten(), *out); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
    return out;
  }
  // The allocator's copy does not follow the current stream: wait for the
  // work that produced `src` first.
  if (absl::Status s = (*k)->synchronize(src.device()); !s.ok()) return s;
  if (absl::Status s = out->copy_from(src.flatten()); !s.ok()) return s;
  return out;
}

// copy_converted where either side is on a device.
absl::Status copy_converted_on_device(const Tensor& dst, const Tensor& src,
                                      const std::string& what) {
  const Tensor& on_device = dst.device().is_cpu() ? src : dst;
  absl::StatusOr<DeviceKernels*> k = kernels_for(on_device, what);
  if (!k.ok()) return k.status();
  const Device device = on_device.device();
  if (dst.dtype() == src.dtype()) {
    if (absl::Status s = (*k)->synchronize(device); !s.ok()) return s;
    return dst.copy_from(src);
  }
  if (absl::Status s = check_numel(src, dst.numel(), what); !s.ok()) return s;
  if (dst.dtype() != DType::kFloat32 || !is_16bit_float(src.dtype())) {
    return unsupported(what, "convert", src.dtype(), dst.dtype());
  }
  if (absl::Status s = (*k)->cast(src.flatten(), dst.flatten()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  // The hook's future completes after this: the values must be final then.
  return (*k)->synchronize(device);
}

}  // namespace

absl::StatusOr<DeviceKernels*> kernels_for(const Tensor& t, const std::string& what) {
  if (!t.defined()) return absl::InvalidArgumentError(what + ": bucket buffer is undefined");
  DeviceKernels* k = device_kernels(t.device().type);
  if (k != nullptr) return k;
  const bool cuda = t.device().is_cuda();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": bucket buffer is on ", t.device().str(), " but this build has no ",
      cuda ? "CUDA" : t.device().str(), " kernels",
      cuda ? " (build with --config=cuda and link //cuda)" : ""));
}

absl::Status check_cpu(const Tensor& t, const std::string& what) {
  if (!t.defined()) return absl::InvalidArgumentError(what + ": bucket buffer is undefined");
  if (!t.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": buffer ", t.str(), " is not on the CPU; these hooks run on CPU tensors"));
  }
  return absl::OkStatus();
}

absl::Status divide_in_place(const Tensor& t, int divisor, const std::string& what) {
  if (t.defined() && !t.device().is_cpu()) {
    absl::StatusOr<DeviceKernels*> k = kernels_for(t, what);
    if (!k.ok()) return k.status();
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot divide ", t.str(),
        " on the device (DeviceKernels has no division; use ReduceOp::AVG)"));
  }
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
  if (!src.defined()) return absl::InvalidArgumentError(what + ": bucket buffer is undefined");
  if (!src.device().is_cpu()) return cast_on_device(src, dtype, divisor, what);
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
  if (!dst.defined() || !src.defined()) {
    return absl::InvalidArgumentError(what + ": undefined tensor to convert");
  }
  if (!dst.device().is_cpu() || !src.device().is_cpu()) {
    return copy_converted_on_device(dst, src, what);
  }
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
