#include "hooks/bucket_math.h"

#include "absl/strings/str_cat.h"
#include "hooks/host_kernels.h"

namespace ddpx {
namespace {

absl::Status unsupported(const std::string& what, const char* action, DType from,
                         DType to) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": cannot ", action, " ", dtype_name(from), " to ", dtype_name(to),
      " (supported: float32 <-> float16/bfloat16, or equal dtypes)"));
}

bool is_16bit_float(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

absl::Status annotated(const std::string& what, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::StatusOr<DeviceKernels*> kernels_for(const Tensor& t, const std::string& what) {
  if (!t.defined()) return absl::InvalidArgumentError(what + ": bucket buffer is undefined");
  if (t.device().is_cpu()) return &host_kernels();
  DeviceKernels* k = device_kernels(t.device().type);
  if (k != nullptr) return k;
  const bool cuda = t.device().is_cuda();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": bucket buffer is on ", t.device().str(), " but this build has no ",
      cuda ? "CUDA" : t.device().str(), " kernels",
      cuda ? " (build with --config=cuda and link //cuda)" : ""));
}

absl::Status divide_in_place(const Tensor& t, int divisor, const std::string& what) {
  absl::StatusOr<DeviceKernels*> k = kernels_for(t, what);
  if (!k.ok()) return k.status();
  if (!is_floating_point(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot average a ", dtype_name(t.dtype()),
        " bucket (floating dtypes only)"));
  }
  if (divisor == 1) return absl::OkStatus();
  return annotated(what, (*k)->divide(t, static_cast<float>(divisor)));
}

absl::StatusOr<Tensor> cast_divided(const Tensor& src, DType dtype, int divisor,
                                    const std::string& what) {
  absl::StatusOr<DeviceKernels*> k = kernels_for(src, what);
  if (!k.ok()) return k.status();
  const bool narrowing = src.dtype() == DType::kFloat32 && is_16bit_float(dtype);
  if (src.dtype() != dtype && !narrowing) return unsupported(what, "cast", src.dtype(), dtype);
  absl::StatusOr<Tensor> out = Tensor::empty({src.numel()}, dtype, src.device());
  if (!out.ok()) return out.status();
  if (narrowing) {
    absl::Status s = (*k)->cast_scaled(src.flatten(), static_cast<float>(divisor), *out);
    if (!s.ok()) return annotated(what, s);
    return out;
  }
  if (absl::Status s = (*k)->copy(src.flatten(), *out); !s.ok()) return annotated(what, s);
  if (absl::Status s = divide_in_place(*out, divisor, what); !s.ok()) return s;
  return out;
}

absl::Status copy_converted(const Tensor& dst, const Tensor& src,
                            const std::string& what) {
  if (!dst.defined() || !src.defined()) {
    return absl::InvalidArgumentError(what + ": undefined tensor to convert");
  }
  const Tensor& on_device = dst.device().is_cpu() ? src : dst;
  absl::StatusOr<DeviceKernels*> k = kernels_for(on_device, what);
  if (!k.ok()) return k.status();
  const Device device = on_device.device();
  if (dst.dtype() == src.dtype()) {
    // Tensor::copy_from does not follow a device's stream: the work that
    // produced `src` goes first.
    if (absl::Status s = (*k)->synchronize(device); !s.ok()) return s;
    return dst.copy_from(src);
  }
  if (absl::Status s = check_numel(src, dst.numel(), what); !s.ok()) return s;
  if (dst.dtype() != DType::kFloat32 || !is_16bit_float(src.dtype())) {
    return unsupported(what, "convert", src.dtype(), dst.dtype());
  }
  if (absl::Status s = (*k)->cast(src.flatten(), dst.flatten()); !s.ok()) {
    return annotated(what, s);
  }
  // The hook's future completes after this: the values must be final then.
  return (*k)->synchronize(device);
}

}  // namespace ddpx
