#include "cuda/device_kernels.h"

#include <array>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "cuda/quantize_math.h"

namespace ddpx {
namespace {

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::array<DeviceKernels*, 2>& registry() {
  static std::array<DeviceKernels*, 2> table{};
  return table;
}

bool is_16bit_float(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

absl::Status same_device(const Tensor& a, const Tensor& b, const char* what) {
  if (a.device() == b.device()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": tensors on different devices: ",
                                                 a.str(), " and ", b.str()));
}

absl::Status defined(const Tensor& t, const char* what) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": undefined tensor"));
}

absl::Status quantize_sizes(const char* what, int64_t n, int64_t chunk, const Tensor& bytes) {
  if (chunk <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": chunk must be positive, got ", chunk));
  }
  if (absl::Status s = check_dtype(bytes, DType::kUInt8, what); !s.ok()) return s;
  const int64_t expected = cuda_math::quantized_bytes(n, chunk);
  if (bytes.numel() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", n, " floats in chunks of ", chunk, " take ", expected,
        " bytes, the uint8 tensor holds ", bytes.numel()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceKernels::cast_scaled(const Tensor& src, float divisor, const Tensor& dst) {
  if (divisor == 1.0f) return cast(src, dst);
  if (absl::Status s = check_cast(src, dst); !s.ok()) return s;
  absl::StatusOr<Tensor> scaled = Tensor::empty({src.numel()}, DType::kFloat32, src.device());
  if (!scaled.ok()) return scaled.status();
  if (absl::Status s = copy(src.flatten(), *scaled); !s.ok()) return s;
  if (absl::Status s = divide(*scaled, divisor); !s.ok()) return s;
  return cast(*scaled, dst.flatten());
}

absl::Status DeviceKernels::quantize_divided(const Tensor& src, float divisor,
                                             const Tensor& dst) {
  if (absl::Status s = check_quantize_divided(src, divisor, dst); !s.ok()) return s;
  const int64_t n = src.numel();
  const int64_t used = cuda_math::kQuantizedHeaderBytes + n;
  const Tensor flat = dst.flatten();
  // An empty chunk's header {0, 0} is zero bytes.
  if (n == 0) return zero(flat);
  if (flat.numel() > used) {
    if (absl::Status s = zero(flat.view(used, {flat.numel() - used})); !s.ok()) return s;
  }
  Tensor values = src.flatten();
  if (divisor != 1.0f) {
    absl::StatusOr<Tensor> quotients = Tensor::empty({n}, DType::kFloat32, src.device());
    if (!quotients.ok()) return quotients.status();
    if (absl::Status s = copy(values, *quotients); !s.ok()) return s;
    if (absl::Status s = divide(*quotients, divisor); !s.ok()) return s;
    values = *quotients;
  }
  return quantize_minmax(values, n, flat.view(0, {used}));
}

absl::Status DeviceKernels::dequantize_sum(const Tensor& records, int count, int64_t stride,
                                           const Tensor& dst) {
  if (absl::Status s = check_dequantize_sum(records, count, stride, dst); !s.ok()) return s;
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  if (absl::Status s = zero(dst); !s.ok()) return s;
  const Tensor bytes = records.flatten();
  const int64_t record_bytes = cuda_math::quantized_bytes(n, n);
  for (int i = 0; i < count; ++i) {
    absl::Status s = dequantize_minmax(bytes.view(i * stride, {record_bytes}), n, dst.flatten(),
                                       /*accumulate=*/true);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DeviceKernels::divide_16bit_in_float32(const Tensor& x, float divisor) {
  absl::StatusOr<Tensor> wide = Tensor::empty({x.numel()}, DType::kFloat32, x.device());
  if (!wide.ok()) return wide.status();
  if (absl::Status s = cast(x.flatten(), *wide); !s.ok()) return s;
  if (absl::Status s = divide(*wide, divisor); !s.ok()) return s;
  return cast(*wide, x.flatten());
}

absl::StatusOr<int> DeviceKernels::orthogonalize_counting(const Tensor& matrices, float epsilon) {
  if (absl::Status s = orthogonalize(matrices, epsilon); !s.ok()) return s;
  return -1;
}

absl::Status DeviceKernels::add_then_matmul(const Tensor& m, const Tensor& input,
                                            const Tensor& q, const Tensor& p) {
  if (absl::Status s = add_scaled(m.flatten(), 1.0f, input.flatten(), m.flatten()); !s.ok()) {
    return s;
  }
  return matmul(m, false, q, false, p);
}

absl::Status DeviceKernels::matmul_then_subtract(const Tensor& p, const Tensor& q,
                                                 const Tensor& out, const Tensor& error) {
  if (absl::Status s = matmul(p, false, q, true, out); !s.ok()) return s;
  if (!error.defined()) return absl::OkStatus();
  return add_scaled(error.flatten(), -1.0f, out.flatten(), error.flatten());
}

void register_device_kernels(Device::Type type, DeviceKernels* kernels) {
  std::lock_guard<std::mutex> lock(registry_mu());
  registry()[static_cast<size_t>(type)] = kernels;
}

DeviceKernels* device_kernels(Device::Type type) {
  std::lock_guard<std::mutex> lock(registry_mu());
  return registry()[static_cast<size_t>(type)];
}

absl::Status check_cast(const Tensor& src, const Tensor& dst) {
  if (absl::Status s = defined(src, "cast: source"); !s.ok()) return s;
  if (absl::Status s = defined(dst, "cast: destination"); !s.ok()) return s;
  if (absl::Status s = same_device(src, dst, "cast"); !s.ok()) return s;
  if (absl::Status s = check_numel(dst, src.numel(), "cast: destination"); !s.ok()) return s;
  bool down = src.dtype() == DType::kFloat32 && is_16bit_float(dst.dtype());
  bool up = is_16bit_float(src.dtype()) && dst.dtype() == DType::kFloat32;
  if (!down && !up) {
    return absl::InvalidArgumentError(
        absl::StrCat("cast: supports float32 <-> float16/bfloat16, got ", src.str(), " -> ",
                     dst.str()));
  }
  return absl::OkStatus();
}

absl::Status check_quantize(const Tensor& src, int64_t chunk, const Tensor& dst) {
  if (absl::Status s = defined(src, "quantize: source"); !s.ok()) return s;
  if (absl::Status s = defined(dst, "quantize: destination"); !s.ok()) return s;
  if (absl::Status s = same_device(src, dst, "quantize"); !s.ok()) return s;
  if (absl::Status s = check_dtype(src, DType::kFloat32, "quantize: source"); !s.ok()) return s;
  return quantize_sizes("quantize: destination", src.numel(), chunk, dst);
}

absl::Status check_dequantize(const Tensor& src, int64_t chunk, const Tensor& dst) {
  if (absl::Status s = defined(src, "dequantize: source"); !s.ok()) return s;
  if (absl::Status s = defined(dst, "dequantize: destination"); !s.ok()) return s;
  if (absl::Status s = same_device(src, dst, "dequantize"); !s.ok()) return s;
  if (absl::Status s = check_dtype(dst, DType::kFloat32, "dequantize: destination"); !s.ok())
    return s;
  return quantize_sizes("dequantize: source", dst.numel(), chunk, src);
}

absl::Status check_quantize_divided(const Tensor& src, float divisor, const Tensor& dst) {
  if (absl::Status s = defined(src, "quantize_divided: source"); !s.ok()) return s;
  if (absl::Status s = defined(dst, "quantize_divided: destination"); !s.ok()) return s;
  if (absl::Status s = same_device(src, dst, "quantize_divided"); !s.ok()) return s;
  if (absl::Status s = check_dtype(src, DType::kFloat32, "quantize_divided: source"); !s.ok())
    return s;
  if (absl::Status s = check_dtype(dst, DType::kUInt8, "quantize_divided: destination"); !s.ok())
    return s;
  if (!(divisor > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize_divided: divisor must be positive, got ", divisor));
  }
  const int64_t needed = cuda_math::kQuantizedHeaderBytes + src.numel();
  if (dst.numel() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantize_divided: a record of ", src.numel(), " values takes ", needed,
        " bytes, the uint8 tensor holds ", dst.numel()));
  }
  return absl::OkStatus();
}

absl::Status check_dequantize_sum(const Tensor& records, int count, int64_t stride,
                                  const Tensor& dst) {
  if (absl::Status s = defined(records, "dequantize_sum: records"); !s.ok()) return s;
  if (absl::Status s = defined(dst, "dequantize_sum: destination"); !s.ok()) return s;
  if (absl::Status s = same_device(records, dst, "dequantize_sum"); !s.ok()) return s;
  if (absl::Status s = check_dtype(records, DType::kUInt8, "dequantize_sum: records"); !s.ok())
    return s;
  if (absl::Status s = check_dtype(dst, DType::kFloat32, "dequantize_sum: destination"); !s.ok())
    return s;
  const int64_t record = cuda_math::kQuantizedHeaderBytes + dst.numel();
  if (count < 1 || stride < record || records.numel() < (count - 1) * stride + record) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dequantize_sum: ", count, " records of ", record, " bytes, ", stride,
        " bytes apart, do not fit in ", records.numel(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status check_elementwise(const char* what, const Tensor& a, const Tensor& b,
                               bool float32_only) {
  for (const Tensor* t : {&a, &b}) {
    if (t == &b && !b.defined() && a.defined()) break;  // a one-tensor operation
    if (absl::Status s = defined(*t, what); !s.ok()) return s;
    if (float32_only) {
      if (absl::Status s = check_dtype(*t, DType::kFloat32, what); !s.ok()) return s;
    }
  }
  if (!b.defined()) return absl::OkStatus();
  if (absl::Status s = same_device(a, b, what); !s.ok()) return s;
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dtypes differ: ", a.str(), " and ", b.str()));
  }
  return check_numel(b, a.numel(), what);
}

absl::StatusOr<MatrixBatch> check_matrices(const Tensor& t, const char* what) {
  if (absl::Status s = defined(t, what); !s.ok()) return s;
  if (absl::Status s = check_dtype(t, DType::kFloat32, what); !s.ok()) return s;
  if (t.dim() == 2) return MatrixBatch{1, t.size(0), t.size(1)};
  if (t.dim() == 3) return MatrixBatch{t.size(0), t.size(1), t.size(2)};
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": expected [rows, cols] or [batch, rows, cols], got ", t.str()));
}

absl::StatusOr<MatmulShape> check_matmul(const Tensor& a, bool transpose_a, const Tensor& b,
                                         bool transpose_b, const Tensor& c) {
  absl::StatusOr<MatrixBatch> ma = check_matrices(a, "matmul: a");
  if (!ma.ok()) return ma.status();
  absl::StatusOr<MatrixBatch> mb = check_matrices(b, "matmul: b");
  if (!mb.ok()) return mb.status();
  absl::StatusOr<MatrixBatch> mc = check_matrices(c, "matmul: c");
  if (!mc.ok()) return mc.status();
  if (absl::Status s = same_device(a, b, "matmul"); !s.ok()) return s;
  if (absl::Status s = same_device(a, c, "matmul"); !s.ok()) return s;
  if (a.dim() != b.dim() || a.dim() != c.dim() || ma->batch != mb->batch ||
      ma->batch != mc->batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul: a, b and c need one batch size, got ", a.str(), ", ", b.str(), ", ", c.str()));
  }
  const int64_t m = transpose_a ? ma->cols : ma->rows;
  const int64_t k = transpose_a ? ma->rows : ma->cols;
  const int64_t kb = transpose_b ? mb->cols : mb->rows;
  const int64_t n = transpose_b ? mb->rows : mb->cols;
  if (k != kb || mc->rows != m || mc->cols != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul: op(a) is ", m, " x ", k, ", op(b) is ", kb, " x ", n, ", c is ", mc->rows,
        " x ", mc->cols, " (", a.str(), transpose_a ? " transposed" : "", ", ", b.str(),
        transpose_b ? " transposed" : "", ")"));
  }
  return MatmulShape{ma->batch, m, n, k};
}

}  // namespace ddpx
