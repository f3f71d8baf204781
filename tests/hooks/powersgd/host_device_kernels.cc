#include "tests/hooks/powersgd/host_device_kernels.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cuda/elementwise_math.h"
#include "hooks/kernels/cpu_kernels.h"
#include "hooks/powersgd_orthogonalize.h"

namespace ddpx {
namespace {

absl::Status on_cpu(const Tensor& t, const char* what) {
  if (t.device().is_cpu()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": host kernels got ", t.str()));
}

}  // namespace

absl::Status HostDeviceKernels::cast(const Tensor& src, const Tensor& dst) {
  if (absl::Status s = check_cast(src, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "cast"); !s.ok()) return s;
  const int64_t n = src.numel();
  if (src.dtype() == DType::kFloat32) {
    auto* out = static_cast<uint16_t*>(dst.data());
    if (dst.dtype() == DType::kFloat16) {
      kernels::float_to_half(src.data_as<float>(), out, n);
    } else {
      kernels::float_to_bfloat16(src.data_as<float>(), out, n);
    }
    return absl::OkStatus();
  }
  const auto* in = static_cast<const uint16_t*>(src.data());
  if (src.dtype() == DType::kFloat16) {
    kernels::half_to_float(in, dst.data_as<float>(), n);
  } else {
    kernels::bfloat16_to_float(in, dst.data_as<float>(), n);
  }
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::quantize_minmax(const Tensor&, int64_t, const Tensor&) {
  return absl::UnimplementedError("host kernels: quantize_minmax is not needed by PowerSGD");
}

absl::Status HostDeviceKernels::dequantize_minmax(const Tensor&, int64_t, const Tensor&, bool) {
  return absl::UnimplementedError("host kernels: dequantize_minmax is not needed by PowerSGD");
}

absl::Status HostDeviceKernels::orthogonalize(const Tensor& matrices, float epsilon) {
  absl::StatusOr<MatrixBatch> shape = check_matrices(matrices, "orthogonalize");
  if (!shape.ok()) return shape.status();
  if (absl::Status s = on_cpu(matrices, "orthogonalize"); !s.ok()) return s;
  ++orthogonalize_calls;
  float* data = matrices.data_as<float>();
  for (int64_t b = 0; b < shape->batch; ++b) {
    orthogonalize_columns(data + b * shape->rows * shape->cols, shape->rows, shape->cols,
                          epsilon);
  }
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::matmul(const Tensor& a, bool transpose_a, const Tensor& b,
                                       bool transpose_b, const Tensor& c) {
  absl::StatusOr<MatmulShape> shape = check_matmul(a, transpose_a, b, transpose_b, c);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = on_cpu(a, "matmul"); !s.ok()) return s;
  ++matmul_calls;
  const int64_t m = shape->m, n = shape->n, k = shape->k;
  for (int64_t batch = 0; batch < shape->batch; ++batch) {
    const float* pa = a.data_as<float>() + batch * m * k;
    const float* pb = b.data_as<float>() + batch * k * n;
    float* pc = c.data_as<float>() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          const float x = transpose_a ? pa[l * m + i] : pa[i * k + l];
          const float y = transpose_b ? pb[j * k + l] : pb[l * n + j];
          sum += x * y;
        }
        pc[i * n + j] = sum;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::add_scaled(const Tensor& a, float alpha, const Tensor& b,
                                           const Tensor& out) {
  if (absl::Status s = check_elementwise("add_scaled", a, b, true); !s.ok()) return s;
  if (absl::Status s = check_elementwise("add_scaled: out", a, out, true); !s.ok()) return s;
  if (absl::Status s = on_cpu(a, "add_scaled"); !s.ok()) return s;
  cuda_math::add_scaled_thread(a.data_as<float>(), alpha, b.data_as<float>(),
                               out.data_as<float>(), a.numel(), 0, 1);
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::divide(const Tensor& x, float divisor) {
  if (absl::Status s = check_elementwise("divide", x, Tensor(), true); !s.ok()) return s;
  if (absl::Status s = on_cpu(x, "divide"); !s.ok()) return s;
  cuda_math::divide_thread(x.data_as<float>(), divisor, x.numel(), 0, 1);
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::fill(const Tensor& x, float value) {
  if (absl::Status s = check_elementwise("fill", x, Tensor(), true); !s.ok()) return s;
  if (absl::Status s = on_cpu(x, "fill"); !s.ok()) return s;
  cuda_math::fill_thread(x.data_as<float>(), value, x.numel(), 0, 1);
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::copy(const Tensor& src, const Tensor& dst) {
  if (absl::Status s = check_elementwise("copy", src, dst, false); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "copy"); !s.ok()) return s;
  if (src.nbytes() > 0) memmove(dst.data(), src.data(), src.nbytes());
  return absl::OkStatus();
}

absl::Status HostDeviceKernels::synchronize(Device) { return absl::OkStatus(); }

}  // namespace ddpx
